"""The order and pacing of a replay, as pure functions: records of several clusters merged by
event time (each cluster's own records stay in `seq` order), and when each is due at a given
speed."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def _ts(record: Any) -> int:
    return record["ts_ms"]  # type: ignore[no-any-return]


def _seq(record: Any) -> int:
    return record["seq"]  # type: ignore[no-any-return]


def merged(
    streams: Iterable[Iterator[T]],
    ts: Callable[[T], int] = _ts,
    seq: Callable[[T], int] = _seq,
) -> Iterator[T]:
    """One stream per cluster, each in seq order -> one stream in event-time order; a cluster's
    records never overtake each other even where its ts_ms goes back. Records are dicts, or
    anything `ts` and `seq` read."""
    streams = list(streams)
    if len(streams) == 1:
        yield from streams[0]  # one cluster: its own order is the order
        return
    heads: list[tuple[int, int, int, T, Iterator[T]]] = []
    floors: dict[int, int] = {}  # per stream: the highest ts handed out, so order holds
    for index, stream in enumerate(streams):
        first = next(stream, None)
        if first is not None:
            heapq.heappush(heads, (ts(first), seq(first), index, first, stream))
    while heads:
        due, _, index, record, stream = heapq.heappop(heads)
        floors[index] = max(floors.get(index, due), due)
        yield record
        following = next(stream, None)
        if following is not None:
            later = max(ts(following), floors[index])
            heapq.heappush(heads, (later, seq(following), index, following, stream))


@dataclass
class Pacer:
    """Holds a replay to the original pacing scaled by `speed` (0 = as fast as possible): a
    record `d` ms of event time after the first is due `d / speed` ms after the start."""

    speed: float
    monotonic: Callable[[], float]
    sleep: Callable[[float], None]
    _start: float | None = None
    _first_ts: int | None = None

    def wait_for(self, ts_ms: int) -> None:
        if self.speed <= 0:
            return
        now = self.monotonic()
        if self._start is None or self._first_ts is None:
            self._start, self._first_ts = now, ts_ms
            return
        due = self._start + max(0, ts_ms - self._first_ts) / 1000 / self.speed
        if due > now:
            self.sleep(due - now)
