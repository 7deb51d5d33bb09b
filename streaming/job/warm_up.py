"""A live job's warm-up: before its own query starts, the same query runs its micro-batches
back to back over the first records of the changes topic, into a checkpoint of its own that
is deleted after, its alerts dropped.

Why: a just-started driver runs Spark's per-micro-batch code (planning, the Kafka read, the
stateful stage's bookkeeping) interpreted or through the JIT's profiling tier, and its Python
workers are not yet started. On this project's 2-core machine a micro-batch of a few records
took ~1 s in the job's first seconds and ~0.5 s for its next 40, against ~0.3 s warm
(BENCHMARKS.md, B9), so the alerts of a job's first minute came 2-3 s after their change.
Java 17 keeps no compiled code from one run to the next; running the code is what compiles
it. The warm-up costs the job's start ~25 s beyond its first micro-batch (which the job's own
would take otherwise) and raises nothing: the job's own query, started after, reads from its
own checkpoint as before."""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from zkcdc.ground import logs, waiting
from zkcdc.ground.kafka_connection import KafkaConnectionError
from zkcdc.streaming.job.catch_up import behind_from_watermarks, starting_offsets
from zkcdc.streaming.job.change_source import KafkaInput
from zkcdc.streaming.job.checkpoint_files import last_planned
from zkcdc.streaming.job.lean_batches import LeanBatch, foreach_batch
from zkcdc.streaming.job.spark_activity import TASKS_END_WAIT_S, tasks_ended

log = logs.get("zkcdc.stream")

# Micro-batches the warm-up runs. In a 40-partition job's progress reports (B9's incidents,
# event log on) the first 5 micro-batches took ~1.0-1.4 s and the next 40 ~0.4-0.6 s, ~0.3 s
# after two minutes; after a warm-up of 40, the job's own took ~0.4-0.5 s from its second.
WARM_UP_BATCHES = 40
# Records a warm-up micro-batch reads, at most: a live micro-batch's few. With 60 the same 40
# micro-batches took twice as long and left the job's own slower.
WARM_UP_RECORDS = 6
# The warm-up ends this long after its first micro-batch whatever it has run by then, and
# once its query has waited IDLE_S for records (a topic with nothing more to give).
WARM_UP_LIMIT_S = 45.0
IDLE_S = 1.5
# Its first micro-batch, bounded as the job's own is not: under the test suite's load a
# driver's first micro-batch took over two minutes.
FIRST_BATCH_S = 300.0
CHECKPOINT_DIR = "warm-up"
# What Spark's micro-batch loop says while no record is there to read (MicroBatchExecution).
WAITING_FOR_DATA = "Waiting for data to arrive"


# A job this many records behind skips the warm-up: its own catch-up runs at least ten
# micro-batches of the default bound over minutes, the same code the warm-up would run. At
# 1,000,000 partitions (B9) the warm-up ran to its limit on the snapshot's first topics, ~50 s
# before the job's own first micro-batch, and what it compiled the catch-up compiles anyway.
SKIP_AT_BACKLOG = 1_000_000


def worth_warming_up(behind: int | None, checkpoint: Path, skip_at: int = SKIP_AT_BACKLOG) -> bool:
    """Whether a warm-up is worth its time for the job of `checkpoint`, `behind` records
    behind its topic's end (`backlog`): not at `skip_at` or more (a warm-up killed halfway
    before is removed then); when Kafka cannot say (None), it is run."""
    if behind is not None and behind >= skip_at:
        log.info("no warm-up: the catch-up runs the same code", records_behind=behind)
        shutil.rmtree(warm_up_checkpoint(checkpoint), ignore_errors=True)
        return False
    return True


def backlog(source: KafkaInput, query_checkpoint: Path, timeout_s: float = 10.0) -> int | None:
    """Records between where the job's query reads next (its offsets log, or for a new one
    the source's starting offsets) and the end of its topic; None if Kafka cannot say."""
    from confluent_kafka import KafkaException

    try:
        marks = source.kafka.watermarks(source.topic, timeout_s)
    except (KafkaConnectionError, KafkaException):
        return None
    starts = next_offsets(query_checkpoint, source.topic)
    if starts is None:
        starts = starting_offsets(source.starting_offsets, source.topic, list(marks))
    return behind_from_watermarks(starts, marks)


def next_offsets(query_checkpoint: Path, topic: str) -> dict[int, int] | None:
    """Where a query that has planned micro-batches reads next: the end of the last one in
    its offsets log (None: it planned none, or its log does not name the topic)."""
    # A damaged entry reads as none: the job refuses the checkpoint, in one line.
    for line in reversed(last_planned(query_checkpoint)):
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            offsets = json.loads(line)
            if isinstance(offsets, dict) and isinstance(offsets.get(topic), dict):
                return {int(p): int(o) for p, o in offsets[topic].items()}
    return None


def warm_up_source(source: KafkaInput) -> KafkaInput:
    """The job's topic, read from its first records a few at a time."""
    return replace(source, starting_offsets="earliest", max_records_per_batch=WARM_UP_RECORDS)


def warm_up_checkpoint(checkpoint: Path) -> Path:
    """Where the warm-up's own checkpoint is: inside the job's, removed before and after (a
    warm-up killed halfway leaves it for the next start to remove)."""
    return checkpoint / CHECKPOINT_DIR


class IdleWatch:
    """Whether a query has waited for records for `idle_s` on end, from its status."""

    def __init__(self, idle_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s = idle_s
        self._clock = clock
        self._since: float | None = None

    def idle(self, status: dict[str, Any]) -> bool:
        waiting_now = not status.get("isDataAvailable") and status.get("message") == (
            WAITING_FOR_DATA
        )
        if not waiting_now:
            self._since = None
            return False
        now = self._clock()
        if self._since is None:
            self._since = now
        return now - self._since >= self.idle_s


def warm_up(
    spark: Any,
    alerts: Any,
    checkpoint: Path,
    stop: threading.Event,
    batches: int = WARM_UP_BATCHES,
    limit_s: float = WARM_UP_LIMIT_S,
) -> None:
    """Runs `alerts` (the job's query over `warm_up_source`) for `batches` micro-batches, or
    until `limit_s` after the first is up, its topic has nothing more, or `stop`. Each batch's
    rows are collected on the driver, as the job's own are, and dropped."""
    started = time.monotonic()
    first, done = threading.Event(), threading.Event()
    ran = 0

    def drop(batch: LeanBatch, batch_id: int) -> None:
        nonlocal ran
        batch.rows()
        ran = batch_id + 1
        first.set()
        if ran >= batches:
            done.set()

    shutil.rmtree(checkpoint, ignore_errors=True)
    log.info("warming up", micro_batches=batches, within_s=limit_s)
    writer, call = foreach_batch(alerts, drop)
    query = (
        writer.option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(processingTime="0 seconds")
        .start()
    )
    idle = IdleWatch(IDLE_S)

    def over() -> bool:
        return (
            done.is_set() or stop.is_set() or query.exception() is not None
            or idle.idle(query.status)
        )  # fmt: skip

    try:
        # The first micro-batch is the driver's and the workers' start, which the job's own
        # first would take otherwise: the time limit counts from its end.
        waiting.wait_until(lambda: first.is_set() or over(), FIRST_BATCH_S,
                           what="the warm-up's first micro-batch", interval_s=0.1)  # fmt: skip
        waiting.wait_until(over, limit_s, what="the warm-up's micro-batches", interval_s=0.1)
    except waiting.WaitFailed:
        pass  # what ran by then is the warm-up
    finally:
        # Nothing of it is kept: the micro-batch under way is cut short, as a stop cuts the
        # job's own, and the checkpoint goes once its tasks have ended.
        call.stop(query, let_finish_s=0)
        with contextlib.suppress(Exception):
            spark.sparkContext.cancelAllJobs()
        tasks_ended(spark, TASKS_END_WAIT_S)
        shutil.rmtree(checkpoint, ignore_errors=True)
    failed = query.exception()
    if failed is not None and not stop.is_set():
        # The job's own query, started next, says what is wrong if it is wrong for it too.
        log.warning("the warm-up's query failed", error=str(failed).splitlines()[0][:300])
    log.info("warmed up", micro_batches=ran, seconds=round(time.monotonic() - started, 1))
