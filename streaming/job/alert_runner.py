"""`zkcdc stream alerts`: source -> per-cluster alert engine -> sinks, as one streaming query
(plus a dead-letter query on Kafka input), checkpointed so a restart resumes where it stopped."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.metrics_server import serve
from zkcdc.streaming.job.alert_job import REORDER_MS, alerts_stream
from zkcdc.streaming.job.change_source import (
    KafkaInput,
    LogInput,
    read_changes,
    spark_kafka_options,
)
from zkcdc.streaming.job.job_metrics import JobMetrics
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.sinks.alert_sinks import (
    AlertSinks,
    AlertText,
    BatchLedger,
    SinkOptions,
    alert_key,
    ensure_topics,
)
from zkcdc.streaming.sinks.file_delivery import append_alerts, state_upserts, write_batch
from zkcdc.streaming.state.state_topic import StateTopicSink

log = structlog.get_logger("zkcdc.stream")
DEAD_LETTER_TRIGGER_MS = 5_000


@dataclass(frozen=True)
class AlertJobOptions:
    source: KafkaInput | LogInput
    sinks: SinkOptions
    checkpoint: Path
    master: str = "local[2]"
    rules: RuleSettings = field(default_factory=RuleSettings)
    trigger_ms: int = 500
    available_now: bool = False  # process what is there, then stop (replays, tests)
    dead_letter_topic: str | None = None
    reorder_ms: int = REORDER_MS
    state_kafka: KafkaConnection | None = None  # publish state upserts to this Kafka ...
    state_topic: str = "zkcdc.state"  # ... on this compacted topic
    state_out: Path | None = None  # write the final state here (JSON lines, one per entity)
    metrics_port: int | None = None  # serve /metrics and /healthz ...
    metrics_host: str = "127.0.0.1"
    metrics_web_config: Path | None = None  # ... with TLS and basic auth


def run(options: AlertJobOptions, stop: threading.Event) -> None:
    # Sinks first: a Kafka that cannot take alerts is a one-line error before Spark starts.
    sinks = AlertSinks(options.sinks, options.checkpoint)
    state_sink = (
        StateTopicSink(options.state_kafka, options.state_topic) if options.state_kafka else None
    )
    ledger = BatchLedger(options.checkpoint / "sink-ledger")
    metrics = JobMetrics()
    server = (
        None
        if options.metrics_port is None
        else serve(
            metrics.registry,
            options.metrics_host,
            options.metrics_port,
            metrics.health,
            options.metrics_web_config,
        )
    )
    spark = session(options.master, "zkcdc-alerts")
    queries = []
    try:
        records, dead = read_changes(spark, options.source)
        with_state = state_sink is not None or options.state_out is not None
        alerts = alerts_stream(records, options.rules, options.reorder_ms, with_state)
        final_state: dict[str, str | None] = {}

        def delivered_before(batch_id: int) -> set[tuple[str, str]] | None:
            """(alert_id, status) of what the sinks already hold, if the job died while
            delivering `batch_id` (some of it may be there); None if it never began."""
            pending = ledger.pending()
            if pending is None or pending[0] != batch_id:
                return None
            return sinks.delivered(pending[1] - 60_000)

        def deliver(batch: Any, batch_id: int) -> None:
            if batch_id <= ledger.last():
                return  # delivered before the restart that re-runs it
            if options.available_now and options.sinks.files_only and state_sink is None:
                # A bounded input's micro-batch can hold a whole log's alerts: Spark writes them
                # (live micro-batches are small: collecting them is quicker).
                deliver_files(batch, batch_id)
                return
            # collect(), not toArrow(): a replay's one micro-batch can hold 600,000 alerts, and
            # Arrow results, uncompressed, ran the 512 MB driver out of memory where rows did not.
            rows = batch.collect()  # Rows are tuples in OUTPUT_SCHEMA's order: kind, key, ...
            alerts = [AlertText(k, s, at, j) for kind, k, j, s, at in rows if kind == "alert"]
            if alerts and (there := delivered_before(batch_id)) is not None:
                alerts = [a for a in alerts if (a.alert_id, a.status) not in there]
            ledger.begin(batch_id, int(time.time() * 1000))
            sinks.deliver(alerts)
            upserts = [(k, j) for kind, k, j, _, _ in rows if kind == "state"]
            if state_sink is not None:
                state_sink.deliver(upserts)
            final_state.update(upserts)
            ledger.mark(batch_id)
            metrics.delivered(a.status for a in alerts)

        def deliver_files(batch: Any, batch_id: int) -> None:
            folder = options.checkpoint / "batch-out" / str(batch_id)
            shutil.rmtree(folder, ignore_errors=True)
            write_batch(batch, folder)
            there = delivered_before(batch_id)
            skip = None if there is None else (lambda line: alert_key(line) in there)
            ledger.begin(batch_id, int(time.time() * 1000))
            assert options.sinks.alerts_out is not None
            append_alerts(folder, options.sinks.alerts_out, skip)
            final_state.update(state_upserts(folder))
            ledger.mark(batch_id)
            metrics.delivered(())
            shutil.rmtree(folder, ignore_errors=True)

        writer = (
            alerts.writeStream.foreachBatch(deliver)
            .option("checkpointLocation", str(options.checkpoint / "alerts"))
            .outputMode("append")
        )
        writer = (
            writer.trigger(availableNow=True)
            if options.available_now
            else writer.trigger(processingTime=f"{options.trigger_ms} milliseconds")
        )
        queries.append(writer.start())
        if (
            dead is not None
            and options.dead_letter_topic
            and isinstance(options.source, KafkaInput)
        ):
            ensure_topics(options.source.kafka, [options.dead_letter_topic])
            queries.append(
                dead.selectExpr(
                    "concat(topic, '/', partition, '/', offset) AS key",
                    "to_json(named_struct('topic', topic, 'partition', partition, 'offset', "
                    "offset, 'reason', reason, 'value_base64', base64(value))) AS value",
                )
                .writeStream.format("kafka")
                .options(**spark_kafka_options(options.source.kafka))
                .option("topic", options.dead_letter_topic)
                .option("checkpointLocation", str(options.checkpoint / "dead-letters"))
                # Rare and not urgent: a slow trigger keeps this second query off the cores
                # the alerts need (without one it would run a micro-batch per heartbeat).
                .trigger(**dead_letter_trigger(options))
                .start()
            )
        metrics.started(True)
        reported = -1
        while not stop.is_set():
            if options.available_now and not queries[0].isActive:
                break
            for query in queries:
                if query.exception() is not None:
                    raise_query_error(query)
            reported = report_progress(queries[0], reported)
            stop.wait(0.5)
        report_progress(queries[0], reported)
        if options.state_out is not None:
            write_state(options.state_out, final_state)
    finally:
        for query in queries:
            with contextlib.suppress(Exception):
                query.stop()
        sinks.close()
        if state_sink is not None:
            state_sink.close()
        spark.stop()
        metrics.started(False)
        if server is not None:
            server.shutdown()
            server.server_close()
    for query in queries:
        if query.exception() is not None:
            raise_query_error(query)


def write_state(path: Path, state: dict[str, str | None]) -> None:
    """The state as it stands at the end: one JSON object per entity, sorted by key."""
    lines = [value for _, value in sorted(state.items()) if value is not None]
    path.write_text("".join(line + "\n" for line in lines))


def dead_letter_trigger(options: AlertJobOptions) -> dict[str, Any]:
    if options.available_now:
        return {"availableNow": True}
    return {"processingTime": f"{max(options.trigger_ms, DEAD_LETTER_TRIGGER_MS)} milliseconds"}


def report_progress(query: Any, reported: int) -> int:
    """Logs each micro-batch that read records (one JSON line on stderr): how many, how long."""
    for progress in query.recentProgress:
        batch = progress["batchId"]
        if batch <= reported:
            continue
        reported = batch
        if progress["numInputRows"]:
            log.info(
                "micro-batch",
                batch=batch,
                records=progress["numInputRows"],
                duration_ms=progress["durationMs"].get("triggerExecution"),
                records_per_s=round(progress.get("processedRowsPerSecond") or 0),
                # Where a slow micro-batch spent its time (Spark's own phases, ms).
                phases={k: v for k, v in progress["durationMs"].items() if k != "triggerExecution"},
                state_commit_ms=sum(
                    op.get("commitTimeMs", 0) for op in progress.get("stateOperators", [])
                ),
            )
    return reported


def raise_query_error(query: Any) -> None:
    from zkcdc.streaming.errors import StreamingError

    message = str(query.exception()).strip().splitlines()[0][:300]
    raise StreamingError(f"streaming query {query.name or query.id} failed: {message}")
