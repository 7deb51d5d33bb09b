"""Reading Kafka's JSON znode values strictly: anything unexpected is `Unparseable`, never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from capture.errors import CaptureError

MAX_BYTES = 1024 * 1024

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
        value = json.loads(text)
    except ValueError as exc:
        raise Unparseable(f"malformed JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise Unparseable(f"expected a JSON object, got {type(value).__name__}")
    return value


def integer(obj: dict[str, Any], key: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    # bool is an int in Python but never an integer field in Kafka's formats.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if value is None:
        raise Unparseable(f"missing field {key!r}")
    raise Unparseable(f"field {key!r} is {type(value).__name__}, expected an integer")


def integers(obj: dict[str, Any], key: str) -> tuple[int, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise Unparseable(f"field {key!r} is not a list of integers")
    return tuple(value)


def previous(parse: Callable[[bytes], T], data: bytes | None) -> T | None:
    """The parsed earlier value, or None when there was none or it was unreadable: a change from
    an unreadable value cannot be diffed, so it is decoded as if the znode were new."""
    if data is None:
        return None
    try:
        return parse(data)
    except Unparseable:
        return None
