"""The order and pacing of a replay, as pure functions: records of several clusters merged by
event time (each cluster's own records stay in `seq` order), and when each is due at a given
speed."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any


def merged(streams: Iterable[Iterator[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """One stream per cluster, each in seq order -> one stream in event-time order; a cluster's
    records never overtake each other even where its ts_ms goes back."""
    heads: list[tuple[int, int, int, dict[str, Any], Iterator[dict[str, Any]]]] = []
    floors: dict[int, int] = {}  # per stream: the highest ts handed out, so order holds
    for index, stream in enumerate(streams):
        first = next(stream, None)
        if first is not None:
            heapq.heappush(heads, (first["ts_ms"], first["seq"], index, first, stream))
    while heads:
        ts, _, index, record, stream = heapq.heappop(heads)
        floors[index] = max(floors.get(index, ts), ts)
        yield record
        following = next(stream, None)
        if following is not None:
            due = max(following["ts_ms"], floors[index])
            heapq.heappush(heads, (due, following["seq"], index, following, stream))


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
