"""Reading Kafka's JSON znode values strictly: anything unexpected is `Unparseable`, never a crash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from zkcdc.capture.errors import CaptureError

MAX_BYTES = 1024 * 1024
# The ranges of Avro's int and long: a value outside them could not be written into a record.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

T = TypeVar("T")


class Unparseable(CaptureError, ValueError):
    """The bytes are not what Kafka writes at this path; the message is the event's `reason`."""


def json_object(data: bytes | None) -> dict[str, Any]:
    if data is None:
        raise Unparseable("no data")
    if len(data) > MAX_BYTES:
        raise Unparseable(f"{len(data)} bytes, more than the {MAX_BYTES} a decoder reads")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unparseable(f"not UTF-8 at byte {exc.start}") from exc
    try:
        # orjson, not json: it rejects what Kafka never writes and json accepts, and what the
        # records could not carry (nesting past 1,024 levels, where json raises RecursionError;
        # lone surrogates, which cannot be encoded as UTF-8 again).
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise Unparseable(f"malformed JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise Unparseable(f"expected a JSON object, got {type(value).__name__}")
    return value


def in_range(value: int, what: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    if not low <= value <= high:
        raise Unparseable(f"{what} {value} is out of range")
    return value


def integer(obj: dict[str, Any], key: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    # bool is an int in Python but never an integer field in Kafka's formats.
    if isinstance(value, int) and not isinstance(value, bool):
        return in_range(value, f"field {key!r}")
    if value is None:
        raise Unparseable(f"missing field {key!r}")
    raise Unparseable(f"field {key!r} is {type(value).__name__}, expected an integer")


def integers(obj: dict[str, Any], key: str) -> tuple[int, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise Unparseable(f"field {key!r} is not a list of integers")
    for v in value:
        in_range(v, f"field {key!r}: value")
    return tuple(value)


def decimal(text: str, what: str, low: int = INT_MIN, high: int = INT_MAX) -> int:
    """A bare decimal integer as Kafka writes one (ASCII digits, an optional minus sign)."""
    digits = text[1:] if text.startswith("-") else text
    # Not str.isdigit: it is true for digits int() refuses (superscripts); and a bounded length,
    # since int() of thousands of digits is slow, then refused.
    if not (0 < len(digits) <= 20 and digits.isascii() and digits.isdigit()):
        raise Unparseable(f"{what} is not an integer: {text[:40]!r}")
    return in_range(int(text), what, low, high)


def previous(parse: Callable[[bytes], T], data: bytes | None) -> T | None:
    """The parsed earlier value, or None when there was none or it was unreadable: a change from
    an unreadable value cannot be diffed, so it is decoded as if the znode were new."""
    if data is None:
        return None
    try:
        return parse(data)
    except Exception:  # whatever the bytes do to a parser, the earlier value is just unknown
        return None
