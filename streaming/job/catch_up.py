"""How far the alert job is behind its topic's end, and whether it is catching up.

A job started on a new checkpoint against a large cluster reads capture's whole snapshot
before its alerts are live (about 2,000,000 records at 1,000,000 partitions: minutes), as does
a job resumed after a long stop or a storm larger than its micro-batches. Its user sees how
far it has to go (`records_behind` on every micro-batch line, the `zkcdc_alerts_records_behind`
gauge), a line when a catch-up begins, and one when the job is live again. Before its first
micro-batch, the distance is counted from where its query starts to the topic's watermarks
(`behind_from_watermarks`); after each, from Spark's progress (`behind_from_progress`).

Pure: the progress reports are Spark's JSON as the job reads them (alert_runner.py), the
watermarks Kafka's as warm_up.backlog asks them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A catch-up begins at this many records behind (a default micro-batch's bound: seconds of
# work at least) and ends below CAUGHT_UP_RECORDS. Apart, so that a job under a storm whose
# micro-batches each leave a few thousand records for the next is not said to start and end
# a catch-up every micro-batch.
CATCH_UP_RECORDS = 100_000
CAUGHT_UP_RECORDS = 10_000
EARLIEST, LATEST = -2, -1  # as Spark's startingOffsets JSON names them


def behind_from_progress(progress: dict[str, Any]) -> int | None:
    """Records between where a micro-batch stopped reading and the newest its sources had
    (Spark's `endOffset` and `latestOffset`, summed over every Kafka partition); None where no
    source says (an event log). A partition the micro-batch did not read to yet (one new to
    the topic) counts from its start. Counted in offsets: capture's transactions' commit
    markers take one each, a few in a catch-up of thousands of records."""
    total: int | None = None
    for source in progress.get("sources") or ():
        latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
        if latest is None or end is None:
            continue
        total = (total or 0) + sum(
            max(0, offset - end.get(place, 0)) for place, offset in latest.items()
        )
    return total


def behind_from_watermarks(starts: dict[int, int], marks: dict[int, tuple[int, int]]) -> int:
    """Records behind at a query's start (before its first micro-batch reports): from each
    partition's start (an offset, EARLIEST or LATEST; a partition not named:
    EARLIEST) to its end, by its (low, high) watermarks."""
    total = 0
    for partition, (low, high) in marks.items():
        start = starts.get(partition, EARLIEST)
        start = low if start == EARLIEST else high if start == LATEST else max(start, low)
        total += max(0, high - start)
    return total


def starting_offsets(option: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """A new query's starts, from the source's startingOffsets ("earliest", "latest", or
    Spark's JSON of offsets by topic and partition)."""
    if option in ("earliest", "latest"):
        return dict.fromkeys(partitions, EARLIEST if option == "earliest" else LATEST)
    try:
        named = json.loads(option)[topic]
        return {p: int(named.get(str(p), EARLIEST)) for p in partitions}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}  # Spark refuses it when the query starts, in its own words


def _offsets(value: Any) -> dict[tuple[str, str], int] | None:
    """A Kafka source's offsets ({topic: {partition: offset}}, as JSON or as its text) by
    (topic, partition); None for anything else."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    out: dict[tuple[str, str], int] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            return None
        for partition, offset in partitions.items():
            if isinstance(offset, int) and not isinstance(offset, bool):
                out[(topic, str(partition))] = offset
    return out


@dataclass(frozen=True)
class CatchUpBegun:
    records_behind: int


@dataclass(frozen=True)
class CaughtUp:
    records: int  # read from the catch-up's start to its end
    seconds: float

    @property
    def records_per_s(self) -> int:
        return round(self.records / self.seconds) if self.seconds > 0 else 0


class CatchUp:
    """Told how far behind the job is (at its start, then after each micro-batch), says when
    a catch-up begins and when it ends."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._since: float | None = None  # the catch-up's start; None: live
        self._records = 0
        self._first_behind = 0  # how far behind it began

    @property
    def catching_up(self) -> bool:
        return self._since is not None

    def behind(
        self, records_behind: int | None, records_read: int = 0
    ) -> CatchUpBegun | CaughtUp | None:
        """`records_behind` after reading `records_read` more (None: not known, nothing
        said)."""
        if self._since is not None:
            self._records += records_read
        if records_behind is None:
            return None
        if self._since is None:
            if records_behind < CATCH_UP_RECORDS:
                return None
            self._since, self._records, self._first_behind = self._now(), 0, records_behind
            return CatchUpBegun(records_behind)
        if records_behind >= CAUGHT_UP_RECORDS:
            return None
        ended = CaughtUp(self._records, round(self._now() - self._since, 1))
        self._since = None
        return ended

    def eta_s(self, records_behind: int | None) -> float | None:
        """While catching up: the seconds left to `records_behind` fewer, at the pace the gap
        has closed since the catch-up began (None: live, or no pace yet)."""
        if self._since is None or records_behind is None:
            return None
        closed, took = self._first_behind - records_behind, self._now() - self._since
        if closed <= 0 or took <= 0:
            return None
        return round(records_behind * took / closed, 1)
