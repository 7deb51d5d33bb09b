"""Where an alert's time goes, from the state znode's mtime to the alert on the alerts topic:
the parts of one record's path, each timed by what that step leaves behind.

- **capture**: mtime → the record's `captured_ms` (capture's notification, read and encode);
- **publish**: `captured_ms` → readable by a read_committed consumer (the produce, the
  transaction's commit and its markers, the consumer's fetch);
- **waiting for a micro-batch**: readable → Spark wrote the offsets of the micro-batch that
  took it (the micro-batch under way finishes, the next trigger, its `latestOffset`);
- **micro-batch to the alert**: that offsets file → the alert's Kafka timestamp (its driver
  produced it: Kafka's read, the decode, the stateful stage, the rows back on the driver);
- **alert delivery**: the alert's Kafka timestamp → the bench's consumer had it.

A micro-batch's offsets file (`offsets/N`) is written once its end offsets are known, its
commit file (`commits/N`) once it is done: their mtimes mark its start and end. The record's
Kafka offset says which micro-batch took it. All clocks are this machine's.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# One incident's parts, in the order a record meets them.
PARTS = ("capture", "publish", "wait", "batch_to_alert", "delivery")
PART_NAMES = {
    "capture": "capture (mtime → read)",
    "publish": "publish (read → readable: produce, commit)",
    "wait": "waiting for its micro-batch",
    "batch_to_alert": "micro-batch start → alert produced",
    "delivery": "alert delivery (produced → consumed)",
}


class ChangeArrivals(threading.Thread):
    """Reads a changes topic (read_committed) as it fills, keeping its UPDATE records:
    (path, version) -> (ts_ms, captured_ms, readable ms, Kafka partition, offset). `keys`:
    those of these Kafka keys alone; others are not decoded (a big cluster's snapshot)."""

    def __init__(self, bootstrap: str, topic: str, keys: set[bytes] | None = None) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        from zkcdc.capture.encoding.avro_codec import change_decoder

        self.topic = topic
        self.keys = keys
        self.decoder = change_decoder(None)
        self.seen: dict[tuple[str, int], tuple[int, int, int, int, int]] = {}
        self.halt = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"budget-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10, "topic.metadata.refresh.interval.ms": 500,
        })  # fmt: skip

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        while not self.halt.is_set():
            meta = self._consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
            if meta is not None and meta.partitions:
                self._consumer.assign(
                    [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in meta.partitions]
                )
                break
            time.sleep(0.2)
        while not self.halt.is_set():
            for message in self._consumer.consume(1000, 0.005):
                if message.error() or (self.keys is not None and message.key() not in self.keys):
                    continue
                now = time.time_ns() // 1_000_000
                record = self.decoder.decode(message.value() or b"")
                if record["op"] == "UPDATE":
                    key = (record["path"], record["after"]["version"])
                    place = (message.partition() or 0, message.offset() or 0)
                    times = (record["ts_ms"], record["captured_ms"], now)
                    self.seen.setdefault(key, (*times, *place))
        self._consumer.close()


@dataclass(frozen=True)
class MicroBatch:
    batch_id: int
    started_ms: int  # its offsets file written
    ended_ms: int | None  # its commit file written (None: not committed)
    end_offsets: dict[int, int]  # Kafka partition -> the offset after its last record


def micro_batch_marks(checkpoint: Path) -> list[MicroBatch]:
    """The query's micro-batches, from its checkpoint's offsets and commits, oldest first."""
    batches = []
    for file in (checkpoint / "offsets").iterdir():
        if not file.name.isdigit():
            continue
        lines = file.read_text().splitlines()
        sources = json.loads(lines[2]) if len(lines) > 2 else {}
        ends = {int(p): int(o) for topic in sources.values() for p, o in topic.items()}
        commit = checkpoint / "commits" / file.name
        batches.append(
            MicroBatch(
                int(file.name),
                int(file.stat().st_mtime * 1000),
                int(commit.stat().st_mtime * 1000) if commit.exists() else None,
                ends,
            )
        )
    return sorted(batches, key=lambda b: b.batch_id)


def micro_batch_lines(work: Path) -> list[dict[str, Any]]:
    """The alert job's `micro-batch` log lines (JSON, in `work`/alerts.log), in their order."""
    return [json.loads(line) for line in (work / "alerts.log").read_text(errors="replace")
            .splitlines() if line.startswith("{") and '"micro-batch"' in line]  # fmt: skip


def micro_batch_phases(lines: list[dict[str, Any]]) -> dict[int, dict[str, int]]:
    """Each logged micro-batch's phases (Spark's `durationMs`), with its whole time as
    `triggerExecution`, by batch id."""
    return {
        entry["batch"]: {**entry["phases"], "triggerExecution": entry["duration_ms"]}
        for entry in lines
    }


def _taking(batches: list[MicroBatch], partition: int, offset: int) -> MicroBatch | None:
    """The micro-batch that read the record at `offset` of `partition`: the one whose end
    passed it where the one before had not. Spark keeps the files of its last 100
    micro-batches only; a record older than the oldest kept has none."""
    before = None
    for batch in batches:
        if batch.end_offsets.get(partition, 0) > offset:
            if before is None and batch.batch_id != 0:
                return None  # the batch before it is gone: it may have read the record
            return batch
        before = batch
    return None


@dataclass
class Traces:
    """Everything the run left behind, to take each timed incident's path apart."""

    fired: dict[str, list[tuple[int, int]]]  # entity -> (started_ms, arrival) each
    produced: dict[tuple[str, int], int]  # (entity, started_ms) -> the alert's Kafka time
    versions: dict[tuple[str, int], int]  # (entity, mtime) -> the znode's version
    changes: dict[tuple[str, int], tuple[int, int, int, int, int]]  # ChangeArrivals.seen
    state_path: str  # the state znode of partition {} of the incidents' topic
    phases: dict[int, dict[str, int]]

    def trace(
        self, entity: str, mtime: int, batches: list[MicroBatch], match_ms: int
    ) -> dict[str, Any] | None:
        """One incident's parts (ms), or None where a step left no trace. `batches`: the
        checkpoint's micro-batches soon after the incident (Spark deletes old ones)."""
        started = [(at, arrived) for at, arrived in self.fired.get(entity, [])
                   if 0 <= at - mtime < match_ms]  # fmt: skip
        version = self.versions.get((entity, mtime))
        path = self.state_path.format(entity.rsplit("/", 1)[1])
        change = self.changes.get((path, version)) if version is not None else None
        if not started or change is None:
            return None
        at, arrived = min(started)
        produced = self.produced.get((entity, at))
        _, captured, readable, partition, offset = change
        batch = _taking(batches, partition, offset)
        if produced is None or batch is None:
            return None
        return {
            "capture": captured - mtime,
            "publish": readable - captured,
            "wait": batch.started_ms - readable,
            "batch_to_alert": produced - batch.started_ms,
            "delivery": arrived - produced,
            "total": arrived - mtime,
            "batch_id": batch.batch_id,
            "batch_ms": None if batch.ended_ms is None else batch.ended_ms - batch.started_ms,
        }

    def of(
        self, placed: list[tuple[str, int]], batches: list[MicroBatch], match_ms: int = 400
    ) -> dict[str, Any]:
        """The parts of every timed incident, their p50 and p99, and the phases of the
        micro-batches that raised the alerts (p50 each)."""
        traces = [t for e, m in placed if (t := self.trace(e, m, batches, match_ms)) is not None]
        summary: dict[str, Any] = {"traced": len(traces), "incidents": len(placed)}
        for part in (*PARTS, "total", "batch_ms"):
            values = sorted(t[part] for t in traces if t[part] is not None)
            summary[part] = {"p50": _pick(values, 0.5), "p99": _pick(values, 0.99)}
        raised = {t["batch_id"] for t in traces}
        names = sorted({k for b in raised for k in self.phases.get(b, {})})
        summary["phases_p50"] = {
            name: _pick(sorted(self.phases[b][name] for b in raised
                               if name in self.phases.get(b, {})), 0.5)
            for name in names
        }  # fmt: skip
        summary["traces"] = traces
        return summary


def _pick(values: list[int], q: float) -> int | None:
    return values[min(len(values) - 1, int(len(values) * q))] if values else None
