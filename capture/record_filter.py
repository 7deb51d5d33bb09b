"""Which change records `zkcdc events cat` prints, and what `zkcdc events stats` counts: pure
functions over records as the event log reader yields them (dicts of the contract's fields)."""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from zkcdc.capture.errors import CaptureError


def parse_time(text: str) -> int:
    """ZooKeeper time as epoch milliseconds, or an ISO 8601 time (UTC unless it says)."""
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)
    try:
        moment = datetime.datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError as exc:
        raise CaptureError(
            f"not a time: {text!r} (epoch milliseconds or ISO 8601, e.g. 2026-11-22T01:00:00Z)"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True)
class RecordFilter:
    path_prefix: str | None = None
    types: frozenset[str] = frozenset()  # ops (UPDATE) or event types (ISR_SHRUNK), any of them
    since_ms: int | None = None  # ts_ms >= since
    until_ms: int | None = None  # ts_ms < until
    cluster: str | None = None

    def __post_init__(self) -> None:
        since, until = self.since_ms, self.until_ms
        if since is not None and until is not None and until <= since:
            raise CaptureError("--until must be later than --since")

    def __call__(self, record: dict[str, Any]) -> bool:
        if self.cluster is not None and record["cluster"] != self.cluster:
            return False
        ts = record["ts_ms"]
        if self.since_ms is not None and ts < self.since_ms:
            return False
        if self.until_ms is not None and ts >= self.until_ms:
            return False
        if self.path_prefix is not None and not (record["path"] or "").startswith(self.path_prefix):
            return False
        if self.types:
            kinds = {record["op"], *(e["type"] for e in record["events"] or ())}
            return not self.types.isdisjoint(kinds)
        return True


@dataclass
class LogStats:
    """Counts over the records of a log, per cluster."""

    records: Counter[str] = field(default_factory=Counter)  # cluster -> records
    ops: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    versions_skipped: int = 0
    records_with_skips: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    seqs: dict[str, tuple[int, int]] = field(default_factory=dict)  # cluster -> (first, last)

    def add(self, record: dict[str, Any]) -> None:
        cluster = record["cluster"]
        self.records[cluster] += 1
        self.ops[record["op"]] += 1
        for event in record["events"] or ():
            self.events[event["type"]] += 1
        skipped = record.get("versions_skipped") or 0
        self.versions_skipped += skipped
        self.records_with_skips += 1 if skipped else 0
        ts = record["ts_ms"]
        self.first_ts = ts if self.first_ts is None else min(self.first_ts, ts)
        self.last_ts = ts if self.last_ts is None else max(self.last_ts, ts)
        seq = record["seq"]
        low, high = self.seqs.get(cluster, (seq, seq))
        self.seqs[cluster] = (min(low, seq), max(high, seq))

    def lines(self) -> list[str]:
        total = sum(self.records.values())
        out = [f"records: {total}"]
        for cluster, n in sorted(self.records.items()):
            first, last = self.seqs[cluster]
            out.append(f"  cluster {cluster}: {n} records, seq {first}..{last}")
        if self.first_ts is not None and self.last_ts is not None:
            span = (self.last_ts - self.first_ts) / 1000
            out.append(f"time: {_iso(self.first_ts)} .. {_iso(self.last_ts)} ({span:.1f} s)")
        out.append("by op: " + ", ".join(f"{k} {v}" for k, v in sorted(self.ops.items())))
        out.append("by event type:")
        out += [f"  {kind:<28} {n}" for kind, n in sorted(self.events.items())]
        out.append(
            f"versions skipped: {self.versions_skipped} (in {self.records_with_skips} records)"
        )
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "records": sum(self.records.values()),
            "clusters": {
                c: {"records": n, "first_seq": self.seqs[c][0], "last_seq": self.seqs[c][1]}
                for c, n in sorted(self.records.items())
            },
            "first_ts_ms": self.first_ts,
            "last_ts_ms": self.last_ts,
            "ops": dict(sorted(self.ops.items())),
            "events": dict(sorted(self.events.items())),
            "versions_skipped": self.versions_skipped,
            "records_with_skips": self.records_with_skips,
        }


def _iso(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
