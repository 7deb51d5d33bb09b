"""`zkcdc stream alerts`: source -> per-cluster alert engine -> sinks, as one streaming query
(the dead letters of Kafka input through it too), checkpointed so a restart resumes where it
stopped."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zkcdc.ground import logs
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.metrics_server import serve
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_job import alerts_stream
from zkcdc.streaming.job.batch_delivery import BatchDelivery
from zkcdc.streaming.job.bucketed_map import Buckets
from zkcdc.streaming.job.catch_up import CatchUp, CatchUpBegun, CaughtUp, behind_from_progress
from zkcdc.streaming.job.change_source import (
    KafkaInput,
    LogInput,
    changes_with_dead_letters,
    source_partitions,
)
from zkcdc.streaming.job.checkpoint_files import refuse_if_damaged
from zkcdc.streaming.job.checkpoint_layout import recorded_buckets, settle_layout
from zkcdc.streaming.job.compiler_priority import COMPILER_NICENESS, compilers_niced, jvm_pid
from zkcdc.streaming.job.driver_jar import local_file_system
from zkcdc.streaming.job.driver_jvm import driver_running, ending_with_the_driver
from zkcdc.streaming.job.initial_state import (
    TAKE_AT,
    InitialStateError,
    TakenBacklog,
    committed_nothing,
    delivered_rows,
    initial_state,
    take,
    taken,
    worth_taking,
)
from zkcdc.streaming.job.job_metrics import JobMetrics
from zkcdc.streaming.job.lean_batches import STOP_WAIT_S, BatchCall, foreach_batch
from zkcdc.streaming.job.moved_checkpoint import repoint_state_schemas
from zkcdc.streaming.job.query_failures import (
    KafkaOutage,
    failure_line,
    kafka_out_of_reach,
    started,
)
from zkcdc.streaming.job.saved_state import AFRESH
from zkcdc.streaming.job.shard_stage import sharded_alerts_stream
from zkcdc.streaming.job.spark_activity import TASKS_END_WAIT_S, cancelled_on_stop, tasks_ended
from zkcdc.streaming.job.spark_session import quiet_state_store_maintenance, session
from zkcdc.streaming.job.warm_up import (
    WARM_UP_BATCHES,
    backlog,
    warm_up,
    warm_up_checkpoint,
    warm_up_source,
    worth_warming_up,
)
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.sinks.alert_sinks import AlertSinks, SinkOptions
from zkcdc.streaming.sinks.dead_letter_topic import DeadLetterTopic
from zkcdc.streaming.sinks.ledger import BatchLedger
from zkcdc.streaming.state.state_topic import StateTopicSink

log = logs.get("zkcdc.stream")


# How often the job looks for new records. A record waits for the next look, then for the
# micro-batch under way: at 500 ms B9's p50 at 40 partitions was ~190 ms longer (1,000 against
# 813 ms, warm) than at 100 ms. An idle look is one offsets request to Kafka (~10 ms).
TRIGGER_MS = 100

# Spark gives a Python worker that it starts itself (not through its daemon) 10 s to connect
# back, a figure fixed in its code (PythonWorkerFactory.createSimpleWorker). With --shards,
# transformWithStateInPandas starts one on the driver as each run of the query plans its first
# micro-batch, and on a machine under load it can take longer. The query then starts again
# from its checkpoint, which loses and doubles nothing (the sink ledger), a few times before
# the job gives up.
WORKER_START_FAILURE = "Python worker failed to connect back"
WORKER_START_RESTARTS = 3
# The Spark jobs of a backlog's take, cancelled by a stop (spark_activity.cancelled_on_stop).
TAKE_TAG = "zkcdc-take"


@dataclass(frozen=True)
class AlertJobOptions:
    source: KafkaInput | LogInput
    sinks: SinkOptions
    checkpoint: Path
    master: str = "local[2]"
    # The driver's heap: the alert state of a cluster is one value, and Spark copies it a few
    # times over when it stores it (200,000 partitions need about 2g; BENCHMARKS.md, B8).
    driver_memory: str = "512m"
    # None: the checkpoint's layout, or one picked for a new one (checkpoint_layout.py); 0: one
    # group per cluster; else shard_stage.py's layout of that many partition shards.
    partition_shards: int | None = None
    rules: RuleSettings = field(default_factory=RuleSettings)
    trigger_ms: int = TRIGGER_MS
    available_now: bool = False  # process what is there, then stop (replays, tests)
    # Micro-batches run before the job's own query, over the topic's first records, their
    # alerts dropped (warm_up.py); 0: none.
    warm_up_batches: int = WARM_UP_BATCHES
    # A new checkpoint's query this many records or more behind takes the backlog whole
    # first, its shards starting from it (initial_state.py); 0: never.
    take_backlog_at: int = TAKE_AT
    # Live, in a session of its own: the driver JVM's JIT compilers at this niceness once the
    # job's own query runs (compiler_priority.py); 0: left as they are.
    compiler_niceness: int = COMPILER_NICENESS
    dead_letter_topic: str | None = None
    state_kafka: KafkaConnection | None = None  # publish state upserts to this Kafka ...
    state_topic: str = "zkcdc.state"  # ... on this compacted topic
    state_out: Path | None = None  # write the final state here (JSON lines, one per entity)
    metrics_port: int | None = None  # serve /metrics and /healthz ...
    metrics_host: str = "127.0.0.1"
    metrics_web_config: Path | None = None  # ... with TLS and basic auth


def run(options: AlertJobOptions, stop: threading.Event, spark: Any = None) -> None:
    """The job until `stop` is set (or, available-now, until its input is done). `spark`: a
    session to use instead of starting one (a backfill's, with the lake), left running."""
    shards = settle_layout(options.checkpoint, options.partition_shards, options.master)
    buckets = recorded_buckets(options.checkpoint)
    ledger = BatchLedger(options.checkpoint / "sink-ledger")
    refuse_if_damaged(
        options.checkpoint, [options.checkpoint / "alerts"], AFRESH, delivered=ledger.last()
    )
    for metadata in repoint_state_schemas(options.checkpoint / "alerts"):
        log.info("a moved checkpoint's state schema paths now name its own files",
                 metadata=str(metadata))  # fmt: skip
    # Sinks first: a Kafka that cannot take alerts is a one-line error before Spark starts.
    sinks = AlertSinks(options.sinks, options.checkpoint)
    state_sink = (
        StateTopicSink(options.state_kafka, options.state_topic) if options.state_kafka else None
    )
    dead_letters = (
        DeadLetterTopic(options.source.kafka, options.dead_letter_topic)
        if isinstance(options.source, KafkaInput) and options.dead_letter_topic
        else None
    )
    metrics = JobMetrics()
    server = None
    if options.metrics_port is not None:
        server = serve(
            metrics.registry, options.metrics_host, options.metrics_port, metrics.health,
            options.metrics_web_config,
        )  # fmt: skip
    delivery = BatchDelivery(
        sinks,
        ledger,
        metrics,
        state_sink,
        spark_writes_files=(
            options.available_now and options.sinks.files_only and state_sink is None
        ),
        scratch=options.checkpoint / "batch-out",
        dead_letters=dead_letters,
        keeps_final_state=options.state_out is not None,
    )
    own = spark is None
    if own:
        spark = session(
            options.master, "zkcdc-alerts", shuffle_partitions=max(1, shards),
            driver_memory=options.driver_memory,
        )  # fmt: skip
    log.info("spark started", master=options.master, shards=shards,
             local_files=local_file_system(spark))  # fmt: skip
    with ending_with_the_driver(spark, options.driver_memory, "the alert job"):
        _serve(options, spark, own, shards, buckets, stop, delivery, metrics, server)


def _serve(
    options: AlertJobOptions,
    spark: Any,
    own: bool,
    shards: int,
    buckets: Buckets,
    stop: threading.Event,
    delivery: BatchDelivery,
    metrics: JobMetrics,
    server: Any,
) -> None:
    """The job's queries on a started session, until stopped; then everything let go."""
    sinks, state_sink, dead_letters = delivery.sinks, delivery.state_sink, delivery.dead_letters
    if not own:  # the stateful stage's tasks; the session's own setting back after the job
        shared_partitions = spark.conf.get("spark.sql.shuffle.partitions")
        spark.conf.set("spark.sql.shuffle.partitions", str(max(1, shards)))
    queries: list[tuple[Any, BatchCall]] = []  # a query, and its foreachBatch call
    try:
        with_state = state_sink is not None or options.state_out is not None
        partitions = source_partitions(options.source)

        def alerts_over(source: KafkaInput | LogInput, initial: Any = None) -> Any:
            records = changes_with_dead_letters(spark, source)
            records = read_in_waves_of_one(spark, records, source, partitions)
            if shards:
                return sharded_alerts_stream(
                    records, options.rules, partitions, with_state, shards, buckets, initial
                )
            return alerts_stream(records, options.rules, partitions, with_state)

        # How far the job starts behind its topic's end: its catch-up (catch_up.py) and whether
        # a warm-up is worth its time.
        kafka = options.source if isinstance(options.source, KafkaInput) else None
        behind = None if kafka is None else backlog(kafka, options.checkpoint / "alerts")
        source: KafkaInput | LogInput = options.source
        initial = None
        taken_whole = None
        if kafka is not None and shards:
            taken_whole = _backlog_taken(options, spark, kafka, behind, shards, buckets,
                                         partitions, with_state, delivery, stop)  # fmt: skip
            if stop.is_set():
                return  # stopped while taking it: the next start takes it again
            if taken_whole is not None:
                source = kafka = replace(kafka, starting_offsets=taken_whole.starting_offsets())
                if committed_nothing(options.checkpoint):
                    initial = initial_state(spark, taken_whole)
                behind = backlog(kafka, options.checkpoint / "alerts")
        # Not in a session shared with other work (a backfill's): the warm-up's stop cancels
        # every job of the session. Not after a backlog taken whole: that ran Spark's work.
        if (
            own and options.warm_up_batches and kafka is not None and not options.available_now
            and taken_whole is None and worth_warming_up(behind, options.checkpoint)
        ):  # fmt: skip
            metrics.warming_up(True)
            try:
                warm_up(
                    spark, alerts_over(warm_up_source(kafka)),
                    warm_up_checkpoint(options.checkpoint), stop, options.warm_up_batches,
                )  # fmt: skip
            finally:
                metrics.warming_up(False)
            if stop.is_set():
                return  # stopped while warming up: nothing of the job's own was read
        alerts = alerts_over(source, initial)
        writer, call = foreach_batch(alerts, delivery)
        writer = writer.option("checkpointLocation", str(options.checkpoint / "alerts")).outputMode(
            "append"
        )
        writer = (
            writer.trigger(availableNow=True)
            if options.available_now
            else writer.trigger(processingTime=f"{options.trigger_ms} milliseconds")
        )
        niced = jvm_pid(spark) if own and not options.available_now else None
        with compilers_niced(niced, options.compiler_niceness):
            reports = BatchReports(metrics)
            reports.behind(behind)
            queries.append((started(writer, "the alert job", AFRESH), call))
            metrics.started(True)
            keep_running(writer, queries, options.available_now, stop, reports=reports)
        if options.state_out is not None:
            write_state(options.state_out, delivery.final_state)
    finally:
        # A driver that ended answers nothing: what is asked of it below is skipped.
        running = driver_running(spark, sys.exc_info()[1])
        for query, call in queries if running else ():
            # The micro-batch under way is let finish (its alerts delivered, then committed) for
            # a while; past that, Spark's stop interrupts it, and it is read again next start.
            call.stop(query, STOP_WAIT_S)
        if own and queries and running:
            # The query's stop cancels only its own job group, and a job can outlive it (Spark
            # logs "Failed to cancel job group"): left running, its tasks write into what
            # Spark's stop deletes. Nothing of it is committed; it is read again next start.
            with contextlib.suppress(Exception):
                spark.sparkContext.cancelAllJobs()
        sinks.close()
        if state_sink is not None:
            state_sink.close()
        if dead_letters is not None:
            dead_letters.close()
        if running and not tasks_ended(spark, TASKS_END_WAIT_S):
            log.warning("tasks still running as Spark stops", waited_s=TASKS_END_WAIT_S)
        if own and running:
            with contextlib.suppress(Exception):  # the JVM may be going already
                quiet_state_store_maintenance(spark)
            spark.stop()
        elif running:
            spark.conf.set("spark.sql.shuffle.partitions", shared_partitions)
        metrics.started(False)
        if server is not None:
            server.shutdown()
            server.server_close()
    if (failed := failed_query(queries)) is not None:
        raise_query_error(*failed)


def _backlog_taken(
    options: AlertJobOptions,
    spark: Any,
    kafka: KafkaInput,
    behind: int | None,
    shards: int,
    buckets: Buckets,
    partitions: int,
    with_state: bool,
    delivery: BatchDelivery,
    stop: threading.Event,
) -> TakenBacklog | None:
    """The backlog this checkpoint took whole, taken now if it is worth it, its rows delivered
    once (initial_state.py); None: the query takes its backlog itself, or the job was stopped
    while taking it (its batch query cancelled: the next start takes it again)."""
    try:
        found = taken(options.checkpoint, kafka.topic, shards)
    except InitialStateError as exc:
        raise InitialStateError(f"{exc}; {AFRESH}") from exc
    if found is None:
        if not worth_taking(options.checkpoint, behind, options.take_backlog_at):
            return None
        log.info("taking the backlog whole before the query starts", records_behind=behind)
        began = time.monotonic()
        try:
            with cancelled_on_stop(spark, stop, TAKE_TAG):
                found = take(spark, kafka, options.checkpoint, options.rules, partitions,
                             shards, buckets, with_state)  # fmt: skip
        except Exception:
            if not stop.is_set():
                raise
            log.info("stopped while taking the backlog: the next start takes it again",
                     seconds=round(time.monotonic() - began, 1))  # fmt: skip
            return None
        log.info("backlog taken", seconds=round(time.monotonic() - began, 1))
    ledger = BatchLedger(found.folder / "sink-ledger")
    if ledger.last() < 0:
        delivery.deliver_once(delivered_rows(found), ledger)
        log.info("the backlog's alerts delivered")
    elif not committed_nothing(options.checkpoint):
        # The query's state holds the entries since its first micro-batch: the rows are done.
        shutil.rmtree(found.rows, ignore_errors=True)
    return found


def keep_running(
    writer: Any,
    queries: list[tuple[Any, BatchCall]],
    available_now: bool,
    stop: threading.Event,
    outage: KafkaOutage | None = None,
    reports: BatchReports | None = None,
) -> None:
    """Watches the query; starts it again where Kafka out of reach failed it (after a wait
    that grows while the outage lasts: a daemon rides it out, as capture does), or only a
    Python worker's start."""
    restarts = 0
    outage = outage or KafkaOutage()
    reports = reports or BatchReports()
    while (failed := watch(queries, available_now, stop, reports)) is not None:
        query, call = failed
        if not stop.is_set() and kafka_out_of_reach(str(query.exception()), call.error):
            wait_s = outage.failed()
            log.warning(
                "Kafka out of reach: the streaming query starts again from its checkpoint",
                reason=query_failure_line(query, call),
                in_s=round(wait_s, 1), failures=outage.failures,
            )  # fmt: skip
            if stop.wait(wait_s):  # stopped meanwhile: no query runs, nothing is left to say
                queries.clear()
                call.close()
                return
            call.error = None
            queries[0] = (started(writer, "the alert job", AFRESH), call)
            continue
        if (
            stop.is_set() or restarts == WORKER_START_RESTARTS
            or not worker_start_failed(query, call)
        ):  # fmt: skip
            raise_query_error(query, call)
        restarts += 1
        log.warning(
            "streaming query restarted from its checkpoint",
            reason="a Python worker did not connect back within Spark's 10 s",
            restart=restarts, of=WORKER_START_RESTARTS,
        )  # fmt: skip
        queries[0] = (started(writer, "the alert job", AFRESH), call)


def watch(
    queries: list[tuple[Any, BatchCall]],
    available_now: bool,
    stop: threading.Event,
    reports: BatchReports,
) -> tuple[Any, BatchCall] | None:
    """Until stopped, a query failed (returned) or a bounded run's end: progress logged."""
    reported = -1
    first = queries[0][0]
    while not stop.is_set() and not (available_now and not first.isActive):
        if (failed := failed_query(queries)) is not None:
            return failed
        reported = reports.since(first, reported)
        stop.wait(0.5)
    reports.since(first, reported)
    return failed_query(queries)


def failed_query(queries: list[tuple[Any, BatchCall]]) -> tuple[Any, BatchCall] | None:
    return next(((q, c) for q, c in queries if q.exception() is not None), None)


def worker_start_failed(query: Any, call: BatchCall) -> bool:
    """Whether the query ended only because a Python worker was slow to start (above)."""
    return call.error is None and WORKER_START_FAILURE in str(query.exception())


def write_state(path: Path, state: dict[str, str | None]) -> None:
    """The state as it stands at the end: one JSON object per entity, sorted by key."""
    lines = [value for _, value in sorted(state.items()) if value is not None]
    path.write_text("".join(line + "\n" for line in lines))


def read_in_waves_of_one(
    spark: Any, records: Any, source: KafkaInput | LogInput, partitions: int
) -> Any:
    """On a local master, a topic of more partitions than it has cores is read by as many
    tasks as it has cores, each reading its share of the partitions in turn (their order
    kept). Spark reads a partition a task: capture's default of 6 partitions on 2 cores ran 6
    tasks of 20-30 ms in three waves in every live micro-batch (BENCHMARKS.md, B9), for the
    same records. A cluster's cores are not known while its executors register: its reads
    stay one task a partition."""
    context = spark.sparkContext
    cores = context.defaultParallelism
    if context.master.startswith("local") and isinstance(source, KafkaInput) and partitions > cores:
        return records.coalesce(cores)
    return records


def progress_since(query: Any, reported: int) -> list[dict[str, Any]]:
    """The query's progress reports of micro-batches after `reported`, oldest first, each as
    Spark writes it (JSON). Not `query.recentProgress`: PySpark builds its up to 100 reports
    field by field over py4j, which at every poll kept the driver on a core and the job's
    micro-batches waiting for it (40 partitions: micro-batch p50 1,200 -> 603 ms with this).
    `_jsq` is the query's Java side: PySpark has no public way to its JSON."""
    last = query._jsq.lastProgress()
    if last is None:
        return []
    newest = json.loads(last.json())
    if newest["batchId"] <= reported:
        return []
    if newest["batchId"] == reported + 1:
        return [newest]
    recent = query._jsq.recentProgress()
    out = []
    for i in reversed(range(len(recent))):
        progress = json.loads(recent[i].json())
        if progress["batchId"] <= reported:
            break
        out.append(progress)
    return out[::-1]


class BatchReports:
    """What the job says of each micro-batch from its progress report: a line for one that read
    records (how many, how long, how far behind its topic's end the job still is), the
    records-behind gauge, and the beginning and end of a catch-up (catch_up.py)."""

    def __init__(self, metrics: JobMetrics | None = None, catch_up: CatchUp | None = None) -> None:
        self.metrics = metrics
        self.catch_up = catch_up or CatchUp(time.monotonic)

    def since(self, query: Any, reported: int) -> int:
        """Each micro-batch after `reported`; the last one said."""
        for progress in progress_since(query, reported):
            batch = reported = progress["batchId"]
            behind = behind_from_progress(progress)
            if behind is not None and self.metrics is not None:
                self.metrics.records_behind.set(behind)
            if progress["numInputRows"]:
                log.info(
                    "micro-batch",
                    batch=batch,
                    records=progress["numInputRows"],
                    duration_ms=progress["durationMs"].get("triggerExecution"),
                    records_per_s=round(progress.get("processedRowsPerSecond") or 0),
                    **self._behind(behind),
                    # Where a slow micro-batch spent its time (Spark's own phases, ms).
                    phases={
                        k: v for k, v in progress["durationMs"].items() if k != "triggerExecution"
                    },
                    state_commit_ms=sum(
                        op.get("commitTimeMs", 0) for op in progress.get("stateOperators", [])
                    ),
                    # RocksDB's share of that commit, by step (flush, checkpoint, fileSync, ...).
                    state_commit_steps=commit_steps(progress),
                    # The driver's share of addBatch: alerts, state upserts and dead letters
                    # to their sinks once the rows were in hand.
                    **self._sinks(batch),
                )
            self.behind(behind, progress["numInputRows"])
        return reported

    def behind(self, records_behind: int | None, records_read: int = 0) -> None:
        """How far behind the job is after reading `records_read` more: a catch-up begun or
        ended said, and while one lasts, `/healthz` says how far it has to go."""
        self._say(self.catch_up.behind(records_behind, records_read))
        if self.metrics is not None and records_behind is not None:
            self.metrics.catching_up(records_behind if self.catch_up.catching_up else None)

    def _sinks(self, batch: int) -> dict[str, int]:
        took = None if self.metrics is None else self.metrics.sinks_ms(batch)
        return {} if took is None else {"sinks_ms": took}

    def _behind(self, behind: int | None) -> dict[str, Any]:
        """How far behind, where the source says (Kafka), and while catching up the time left."""
        if behind is None:
            return {}
        eta_s = self.catch_up.eta_s(behind)
        return {"records_behind": behind} | ({} if eta_s is None else {"catch_up_eta_s": eta_s})

    def _say(self, change: CatchUpBegun | CaughtUp | None) -> None:
        """A catch-up begun or ended, in a line of its own."""
        if isinstance(change, CatchUpBegun):
            log.info(
                "catching up: alerts come late until the job has read to its topic's end",
                records_behind=change.records_behind,
            )
        elif isinstance(change, CaughtUp):
            log.info(
                "caught up: alerts are live",
                records=change.records, seconds=change.seconds,
                records_per_s=change.records_per_s,
            )  # fmt: skip


def commit_steps(progress: dict[str, Any]) -> dict[str, int]:
    """RocksDB's commit latencies of a micro-batch, summed over its stores (ms a step)."""
    steps: dict[str, int] = {}
    for op in progress.get("stateOperators", []):
        for name, value in (op.get("customMetrics") or {}).items():
            if name.startswith("rocksdbCommit") and value:
                step = name.removeprefix("rocksdbCommit").removesuffix("Latency")
                steps[step] = steps.get(step, 0) + int(value)
    return steps


def query_failure_line(query: Any, call: BatchCall) -> str:
    """The one line that says why `query` (with `call`, its foreachBatch) failed."""
    return failure_line(query.name or query.id, str(query.exception()), call.error, AFRESH)


def raise_query_error(query: Any, call: BatchCall) -> None:
    raise StreamingError(query_failure_line(query, call))
