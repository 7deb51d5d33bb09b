"""`zkcdc stream history` and `zkcdc replay LOG --lake`: the change records, from the changes
topic or an event log, into the lake's `changes` table, and the alerts topic's alerts into
`alerts`, each as a streaming query checkpointed so a restart resumes where it stopped
(table_writer.py: nothing lost or doubled). A backfill's alerts come from the rules run over
its log (`write_alerts`)."""

from __future__ import annotations

import contextlib
import hashlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from zkcdc.ground import logs
from zkcdc.ground.kafka_connection import KafkaConnectionError
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.change_source import (
    KafkaInput,
    LogInput,
    read_change_structs,
    spark_kafka_options,
)
from zkcdc.streaming.job.checkpoint_files import refuse_if_damaged
from zkcdc.streaming.job.driver_jvm import driver_running, ending_with_the_driver
from zkcdc.streaming.job.lean_batches import STOP_WAIT_S, BatchCall, foreach_batch
from zkcdc.streaming.job.query_failures import (
    KafkaOutage,
    kafka_out_of_reach,
    kafka_reason,
    reason_line,
    started,
)
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.lake.lake_tables import (
    LakeError,
    Table,
    alerts_rows,
    changes_rows,
    check_local_lake,
    ensure_table,
    first_line,
    parquet_settings,
    table_uri,
)
from zkcdc.streaming.lake.table_writer import TableWriter, query_app_id
from zkcdc.streaming.lake.znode_versions import merge_versions

log = logs.get("zkcdc.history")

# How to start the history job afresh when its checkpoint cannot be resumed.
AFRESH = (
    "start afresh with a new --checkpoint: the job reads the changes topic again and the lake "
    "keeps each change once (rows it holds already are left out)"
)

# A live history job looks for new records this often: the lake is read by people, later, so
# seconds of delay cost nothing, and fewer, larger commits make fewer files.
TRIGGER_S = 10


@dataclass(frozen=True)
class HistoryJobOptions:
    source: KafkaInput | LogInput
    lake: str
    checkpoint: Path
    master: str = "local[2]"
    driver_memory: str = "1g"
    available_now: bool = False  # what is there, then stop (a backfill)
    trigger_s: float = TRIGGER_S
    # The alerts topic (of the source's Kafka) into `alerts`; None: no alerts query.
    alerts_topic: str | None = None


def lake_session(master: str, driver_memory: str = "1g") -> Any:
    """A session that writes the lake's tables (`stream history`, `replay --lake`)."""
    return session(master, "zkcdc-history", shuffle_partitions=2, driver_memory=driver_memory,
                   lake=True, conf=parquet_settings())  # fmt: skip


def run_history(options: HistoryJobOptions, stop: threading.Event, spark: Any = None) -> None:
    """The queries until `stop` is set (or, available-now, until their input is done).
    `spark`: a session with the lake (`lake_session`) to use instead of starting one."""
    check_local_lake(options.lake)
    queries = (options.checkpoint, options.checkpoint / Table.ALERTS.value)
    refuse_if_damaged(options.checkpoint, queries, AFRESH, stateful=False)
    if options.alerts_topic is not None and not isinstance(options.source, KafkaInput):
        raise StreamingError("--alerts-topic reads Kafka: give --bootstrap-servers")
    own = spark is None
    if own:
        spark = lake_session(options.master, options.driver_memory)
    with ending_with_the_driver(spark, options.driver_memory, "the history job"):
        _serve(options, spark, own, stop)


def _serve(options: HistoryJobOptions, spark: Any, own: bool, stop: threading.Event) -> None:
    """The job's queries on a started session, until stopped; then they and it let go."""
    queries: list[_Query] = []
    try:
        checkpoint = options.checkpoint.resolve()

        def start(table: Table, frame: Any, rows_of: Callable[[Any], Any]) -> None:
            uri = table_uri(options.lake, table)
            ensure_table(spark, uri, table, rows_of(frame))
            folder = str(checkpoint if table is Table.CHANGES else checkpoint / table.value)
            then = None
            if table is Table.CHANGES:
                znodes = table_uri(options.lake, Table.ZNODES)
                then = partial(merge_versions, znodes)
            writer = TableWriter(table, uri, query_app_id(folder), rows_of,
                                 isinstance(options.source, KafkaInput), then)  # fmt: skip
            # zkcdc's own foreachBatch (lean_batches.py), as the alert job's: the writer's error
            # kept as raised, and a stop that interrupts a micro-batch said to nobody.
            stream, call = foreach_batch(frame, lambda batch, n: writer(batch.frame(), n))
            stream = stream.option("checkpointLocation", folder).queryName(
                f"zkcdc-history-{table.value}"
            )
            stream = (
                stream.trigger(availableNow=True)
                if options.available_now
                else stream.trigger(processingTime=f"{options.trigger_s} seconds")
            )
            queries.append(_Query(stream, call, started(stream, "the history job", AFRESH)))

        start(Table.CHANGES, read_change_structs(spark, options.source), changes_rows)
        # The alert job makes the alerts topic: until it is there, its query waits to start.
        alerts_waiting = options.alerts_topic is not None
        outage = KafkaOutage()
        while True:
            if alerts_waiting and _topic_exists(options.source, options.alerts_topic):
                assert isinstance(options.source, KafkaInput) and options.alerts_topic
                start(Table.ALERTS, _alerts(spark, options.source, options.alerts_topic),
                      alerts_rows)  # fmt: skip
                alerts_waiting = False
            elif alerts_waiting and options.available_now:
                log.warning("no alerts topic: the alerts are not kept", topic=options.alerts_topic)
                alerts_waiting = False
            failed = [q for q in queries if q.query.exception() is not None]
            if failed:
                if not _rides_out(failed, outage, stop):
                    return  # stopped while waiting for Kafka: nothing runs, nothing to say
                continue
            if stop.is_set() or not any(q.query.isActive for q in queries):
                break
            stop.wait(0.5 if not alerts_waiting else min(options.trigger_s, 5.0))
    finally:
        running = driver_running(spark, sys.exc_info()[1])  # an ended driver answers nothing
        for query in queries if running else ():
            # The micro-batch under way is let finish for a while; past that, Spark's stop
            # interrupts it, and it is written at the next start (Delta's idempotent writes).
            query.call.stop(query.query, STOP_WAIT_S)
        if own and running:
            with contextlib.suppress(Exception):
                # A job can outlive its query's stop (Spark's "Failed to cancel job group").
                spark.sparkContext.cancelAllJobs()
                spark.stop()


@dataclass
class _Query:
    """A running query of the job: its writer (which starts it again from its checkpoint),
    its foreachBatch call (what the table's writer raised) and the query."""

    writer: Any
    call: BatchCall
    query: Any

    def failure(self) -> str:
        """Why it failed, in full: the table writer's own error where it raised (Spark's
        message then says only that the Python Proxy raised), else Spark's."""
        error = self.call.error
        return str(error if error is not None else self.query.exception())


def _rides_out(failed: list[_Query], outage: KafkaOutage, stop: threading.Event) -> bool:
    """The failed queries started again where Kafka out of reach failed them all (after the
    outage's wait: a daemon rides an outage out, as capture and the alert job do); False when
    a stop came during the wait. Any other failure ends the job in one line."""
    errors = [q.failure() for q in failed]
    others = [error for error in errors if not kafka_out_of_reach(error, None)]
    if stop.is_set() or others:
        raise StreamingError(f"the history job failed: {reason_line((others or errors)[0])}")
    wait_s = outage.failed()
    log.warning(
        "Kafka out of reach: the history job's queries start again from their checkpoints",
        query=failed[0].query.name, reason=kafka_reason(errors[0]),
        in_s=round(wait_s, 1), failures=outage.failures,
    )  # fmt: skip
    if stop.wait(wait_s):
        return False
    for q in failed:
        q.call.error = None
        q.query = started(q.writer, "the history job", AFRESH)
    return True


def _topic_exists(source: KafkaInput | LogInput, topic: str | None) -> bool:
    if not isinstance(source, KafkaInput) or topic is None:
        return False
    try:
        found = source.kafka.list_topics(15.0).topics.get(topic)
    except KafkaConnectionError:
        return False
    return found is not None and found.error is None and bool(found.partitions)


def _alerts(spark: Any, source: KafkaInput, topic: str) -> Any:
    raw = (
        spark.readStream.format("kafka")
        .options(**spark_kafka_options(source.kafka))
        .option("subscribe", topic)
        .option("startingOffsets", source.starting_offsets)
        .option("failOnDataLoss", "false")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    return raw.selectExpr("CAST(value AS STRING) AS json")


def write_alerts(spark: Any, lake: str, alerts_file: Path) -> None:
    """Alerts as JSON lines (`replay --alerts-out`) into `alerts`: a batch, each alert once."""
    uri = table_uri(lake, Table.ALERTS)
    frame = spark.read.text(str(alerts_file)).withColumnRenamed("value", "json")
    ensure_table(spark, uri, Table.ALERTS, alerts_rows(frame))
    # One version of the file is one batch: its digest names it (a second backfill of the
    # same log writes nothing, by Delta's own check as well as by key).
    digest = hashlib.sha256(alerts_file.read_bytes()).hexdigest()[:16]
    writer = TableWriter(Table.ALERTS, uri, f"zkcdc-alerts-file-{digest}", alerts_rows)
    try:
        writer(frame, 0)
    except Exception as exc:
        raise LakeError(f"cannot write the alerts into {uri}: {first_line(exc)}") from exc
