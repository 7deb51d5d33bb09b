"""What the alert query does with each micro-batch (Spark's foreachBatch, on the driver):
the alerts to the sinks, the state upserts to the state topic, the dead letters to theirs,
the ledger marked."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from zkcdc.ground import logs
from zkcdc.streaming.job.job_metrics import JobMetrics
from zkcdc.streaming.job.lean_batches import LeanBatch
from zkcdc.streaming.sinks.alert_sinks import AlertSinks
from zkcdc.streaming.sinks.dead_letter_topic import DeadLetterTopic
from zkcdc.streaming.sinks.file_delivery import append_alerts, keyed_lines, write_batch
from zkcdc.streaming.sinks.json_lines import alert_key
from zkcdc.streaming.sinks.ledger import BatchLedger
from zkcdc.streaming.sinks.sink import AlertText
from zkcdc.streaming.state.state_topic import StateTopicSink

log = logs.get("zkcdc.stream")

RESUME_MARGIN_MS = 60_000  # a re-run looks this much before its first try for what it sent


@dataclass
class BatchDelivery:
    sinks: AlertSinks
    ledger: BatchLedger
    metrics: JobMetrics
    state_sink: StateTopicSink | None
    spark_writes_files: bool  # a bounded run with files alone: Spark writes the alert lines
    scratch: Path  # where Spark writes them
    dead_letters: DeadLetterTopic | None = None  # None: a source that has none (event logs)
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    clock: Callable[[], float] = time.perf_counter  # the sinks' time, in seconds
    # The state as it stands, for `--state-out` alone: a live job kept every entity's last
    # upsert here for nothing, a million at a million partitions.
    keeps_final_state: bool = False
    final_state: dict[str, str | None] = field(default_factory=dict)

    def __call__(self, batch: LeanBatch, batch_id: int) -> None:
        if batch_id <= self.ledger.last():
            # Delivered before the restart that re-runs it: run again for its state alone.
            batch.run_through()
            return
        if self.spark_writes_files:
            # A bounded input's micro-batch can hold a whole log's alerts: Spark writes them
            # (live micro-batches are small: collecting them is quicker).
            self._files(batch, batch_id)
            return
        # collect(), not toArrow(): a replay's one micro-batch can hold 600,000 alerts, and
        # Arrow results, uncompressed, ran the 512 MB driver out of memory where rows did not.
        rows = batch.rows()  # kind, key, json, status, at_ms[, place]
        if "place" in batch.columns:  # a sharded stage: its shards' alerts merged by place
            rows.sort(key=lambda row: row[5] or "")
        self._deliver(rows, batch_id)

    def deliver_once(self, rows: list[tuple[Any, ...]], ledger: BatchLedger) -> None:
        """Rows made outside the query's micro-batches (a backlog taken whole before it
        starts: initial_state.py), in their order, delivered once: `ledger` keeps them as its
        batch 0, as the job's own ledger keeps a micro-batch."""
        if ledger.last() >= 0:
            return
        replace(self, ledger=ledger)._deliver(rows, 0)

    def _deliver(self, rows: list[tuple[Any, ...]], batch_id: int) -> None:
        handed = self.clock()  # the stage has run: the rest is the sinks'
        alerts = [AlertText(k, s, at, j) for kind, k, j, s, at, *_ in rows if kind == "alert"]
        resumed = self._resumed_since(batch_id)
        self.ledger.begin(batch_id, self.now_ms())
        self.sinks.deliver(alerts, resumed)
        upserts = [(k, j) for kind, k, j, *_ in rows if kind == "state"]
        if self.state_sink is not None:
            self.state_sink.deliver(upserts)
        self._dead_letters([(k, j) for kind, k, j, *_ in rows if kind == "dead"])
        self._placed([(k, j) for kind, k, j, *_ in rows if kind == "order"])
        if self.keeps_final_state:
            self.final_state.update(upserts)
        self.ledger.mark(batch_id)
        self.metrics.delivered(a.status for a in alerts)
        self.metrics.sinks_took(batch_id, self.clock() - handed)

    def _placed(self, figures: list[tuple[str, str | None]]) -> None:
        """Each cluster's placing figures to the metrics; a record dropped, or a gap passed
        without proof, said in one line."""
        for cluster, text in figures:
            counts = orjson.loads(text or "{}")
            self.metrics.placed(cluster, counts)
            if counts.get("unplaced") or counts.get("unproven"):
                log.warning(
                    "change records out of seq order: a partition of the source said nothing "
                    "for a long while, so missing seqs were passed without proof; records "
                    "that came after their place was passed are counted, not alerted on",
                    cluster=cluster, passed_unproven=counts.get("unproven", 0),
                    unplaced=counts.get("unplaced", 0),
                )  # fmt: skip

    def _dead_letters(self, letters: list[tuple[str, str | None]]) -> None:
        if self.dead_letters is not None:
            self.dead_letters.deliver(letters)

    def _resumed_since(self, batch_id: int) -> int | None:
        """If the job died while delivering `batch_id` (some of it may be out): since when
        to ask the sinks what they hold. None if its delivery never began."""
        pending = self.ledger.pending()
        if pending is None or pending[0] != batch_id:
            return None
        return pending[1] - RESUME_MARGIN_MS

    def _files(self, batch: LeanBatch, batch_id: int) -> None:
        out = self.sinks.options.alerts_out
        assert out is not None
        folder = self.scratch / str(batch_id)
        shutil.rmtree(folder, ignore_errors=True)
        write_batch(batch.frame(), folder)
        resumed = self._resumed_since(batch_id)
        there = None if resumed is None else self.sinks.delivered(resumed)
        skip = None if there is None else (lambda line: alert_key(line) in there)
        self.ledger.begin(batch_id, self.now_ms())
        append_alerts(folder, out, skip)
        self._dead_letters(list(keyed_lines(folder, "dead")))
        self._placed(list(keyed_lines(folder, "order")))
        if self.keeps_final_state:
            self.final_state.update(keyed_lines(folder, "state"))
        self.ledger.mark(batch_id)
        self.metrics.delivered(())
        shutil.rmtree(folder, ignore_errors=True)
