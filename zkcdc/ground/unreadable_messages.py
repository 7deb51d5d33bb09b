"""What every zkcdc topic reader does with a message it cannot read: skip it, count it, and say
so in one warning naming topic, partition and offset.

zkcdc's topics are anyone's to write who may write to them, so a reader takes any bytes, any
key, any size, and shows the rest; a flood of bad messages is counted in full but warned about
only for the first `WARNED` of them (the log stays readable)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from zkcdc.ground import logs

T = TypeVar("T")
WARNED = 20  # bad messages warned about one by one; the rest only counted

log = logs.get("zkcdc.read")


def where(message: Any) -> dict[str, Any]:
    """Topic, partition and offset of a confluent-kafka message (or of anything like one)."""
    out: dict[str, Any] = {}
    for name in ("topic", "partition", "offset"):
        try:
            out[name] = getattr(message, name)()
        except Exception:  # a message without it says "?" rather than ending the read
            out[name] = "?"
    return out


class UnreadableMessages:
    """The count of skipped messages of one reader; thread-safe (the ui's feeds share one)."""

    def __init__(self, reader: str, warn: Callable[..., Any] | None = None) -> None:
        self.reader = reader
        self.count = 0
        self._warn = warn or log.warning
        self._lock = threading.Lock()

    def skip(self, message: Any, reason: str) -> None:
        with self._lock:
            self.count += 1
            count = self.count
        if count <= WARNED:
            self._warn(
                "unreadable message skipped", reader=self.reader, **where(message),
                reason=reason[:300], skipped=count,
            )  # fmt: skip
        elif count == WARNED + 1:
            self._warn(
                "unreadable messages: further ones are counted, not logged",
                reader=self.reader, skipped=count,
            )  # fmt: skip

    def read(self, message: Any, decode: Callable[[Any], T]) -> T | None:
        """`decode(message)`, or None (counted, warned) when it raises: a decoder is pure,
        so whatever it raises on is the message's fault, not the reader's."""
        try:
            return decode(message)
        except Exception as exc:
            self.skip(message, f"{type(exc).__name__}: {exc}")
            return None

    def summary(self) -> str:
        return f"{self.count} unreadable message(s) skipped" if self.count else ""
