"""`zkcdc stream alerts`."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from zkcdc.ground import kafka_connection, logs
from zkcdc.ground.cli_options import (
    jvm_memory,
    option_group,
    output_file,
    rule_overrides_option,
    shards_option,
)
from zkcdc.ground.command_settings import given_flags
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.kafka_options import kafka_config_options
from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.ground.user_dirs import state_home
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_runner import TRIGGER_MS, AlertJobOptions, run
from zkcdc.streaming.job.change_source import KafkaInput, LogInput
from zkcdc.streaming.job.compiler_priority import COMPILER_NICENESS
from zkcdc.streaming.job.initial_state import TAKE_AT
from zkcdc.streaming.job.warm_up import WARM_UP_BATCHES
from zkcdc.streaming.lake.history_job import HistoryJobOptions, run_history
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.sinks.alert_sinks import SinkOptions
from zkcdc.streaming.sinks.webhook import FORMATS, webhook_url_problem
from zkcdc.streaming.state.state_topic import read_state
from zkcdc.streaming.state.state_view import ClusterView, choose_cluster
from zkcdc.streaming.stream_settings import StreamSettings
from zkcdc.streaming.stream_settings import load as load_stream_settings


def webhook_urls(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    for url in value:
        if (problem := webhook_url_problem(url)) is not None:
            raise click.BadParameter(problem)
    return value


def default_checkpoint(job: str) -> Path:
    return state_home() / "stream" / job


@click.group()
def stream() -> None:
    """The Structured Streaming jobs (Spark): alerts and live state from the change records."""


# The options `stream alerts` and `stream state` share: input, rules, where Spark runs.
job_options = option_group(
    click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
                 help="TOML settings: the [stream] table (or the top level), under the "
                 "environment (ZKCDC_<SETTING>) and the flags [env ZKCDC_CONFIG_FILE]."),
    click.option("--bootstrap-servers", help="Kafka: read the changes topic, publish there."),
    kafka_config_options,
    click.option("--topic", default="zkcdc.changes", show_default=True,
                 help="The changes topic."),
    click.option("--event-log", type=click.Path(file_okay=False, path_type=Path),
                 help="Read event-log files from this folder instead of Kafka."),
    click.option("--state-topic", default="zkcdc.state", show_default=True,
                 help="Compacted topic for the live state (upserts)."),
    click.option("--checkpoint", type=click.Path(file_okay=False, path_type=Path),
                 help="Checkpoint folder [default ~/.local/state/zkcdc/stream/<job>]."),
    click.option("--master", default="local[2]", show_default=True,
                 help="Spark master: local[N] or spark://HOST:PORT."),
    click.option("--driver-memory", default="512m", show_default=True,
                 callback=jvm_memory,
                 help="The Spark driver's heap (in local mode it runs the tasks too); "
                      "about 2g for 200,000 partitions."),
    shards_option("The layout of the alert state: N partition shards and a cluster shard "
                  "(Spark tasks), or 0 for one group per cluster. auto: the checkpoint's "
                  "layout, or for a new one a shard per core of a local master (at least 2). "
                  "Fixed for a checkpoint."),
    rule_overrides_option("Override a rule setting, e.g. under_replicated_for_ms=2000."),
    click.option("--trigger-ms", default=TRIGGER_MS, show_default=True,
                 help="How often the job looks for new records (a micro-batch at most that "
                      "often)."),
    click.option("--warm-up-batches", type=int, default=WARM_UP_BATCHES,
                 show_default=True,
                 help="Kafka input, live: micro-batches run first over the topic's first "
                      "records, their alerts dropped, so that the job's first alerts come as "
                      "fast as later ones (Spark's code compiled by then); 0: none. "
                      "None either when the job starts 1,000,000 records or more behind."),
    click.option("--take-backlog-at", type=int, default=TAKE_AT,
                 show_default=True, metavar="RECORDS",
                 help="Kafka input, sharded layout: a new checkpoint starting this many records "
                      "or more behind takes the backlog whole through one engine first, and its "
                      "shards start from it (a large cluster's snapshot in a fraction of the "
                      "time); 0: never."),
    click.option("--compiler-niceness", type=int, default=COMPILER_NICENESS,
                 show_default=True,
                 help="Live: the niceness of the driver JVM's JIT compiler threads once the "
                      "job's own query runs (Linux), so that compiling does not delay the "
                      "micro-batches on a machine of few cores; 0: left as they are."),
    click.option("--available-now", is_flag=True,
                 help="Process what is there now, then stop."),
    click.option("--starting-offsets", default="earliest", show_default=True,
                 help="Where a first start (no checkpoint) reads the topic from: earliest, "
                 "latest, or Spark's JSON of offsets per partition."),
    click.option("--max-records-per-batch", default=100_000, show_default=True,
                 help="Kafka input: at most this many records per micro-batch."),
    click.option("--metrics-port", type=int, help="Serve /metrics and /healthz on this port."),
    click.option("--metrics-host", default="127.0.0.1", show_default=True,
                 help="Address the metrics port binds."),
    click.option("--metrics-web-config", type=click.Path(exists=True, dir_okay=False,
                 path_type=Path), help="TLS and basic auth (Prometheus exporters' web-config)."),
    click.option("--schema-registry", metavar="URL",
                 help="Schema registry: also read Confluent-framed values (writer schema by id)."),
    click.option("--dead-letter-topic", default=None,
                 help="Kafka topic for undecodable records [default: <topic>.deadletter]."),
)  # fmt: skip


def _kafka(settings: StreamSettings) -> KafkaConnection | None:
    return kafka_connection.load(
        settings.bootstrap_servers, settings.kafka_config_file, settings.kafka_pairs()
    )


def run_job(
    job: str, sinks: SinkOptions, state: bool, kafka: KafkaConnection | None, s: StreamSettings
) -> None:
    options = AlertJobOptions(
        source=_source(s, kafka),
        sinks=sinks,
        checkpoint=s.checkpoint or default_checkpoint(job),
        master=s.master,
        driver_memory=s.driver_memory,
        partition_shards=s.shards,
        rules=RuleSettings().with_overrides(s.rules),
        trigger_ms=s.trigger_ms,
        warm_up_batches=s.warm_up_batches,
        take_backlog_at=s.take_backlog_at,
        compiler_niceness=s.compiler_niceness,
        available_now=s.available_now,
        dead_letter_topic=s.dead_letter_topic or f"{s.topic}.deadletter",
        state_kafka=kafka if state else None,
        state_topic=s.state_topic,
        metrics_port=s.metrics_port,
        metrics_host=s.metrics_host,
        metrics_web_config=s.metrics_web_config,
    )
    logs.configure()
    run(options, _stop_on_signals())


def _stop_on_signals() -> threading.Event:
    """Set by SIGTERM or SIGINT: the job finishes its micro-batch and stops."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def _source(s: StreamSettings, kafka: KafkaConnection | None) -> KafkaInput | LogInput:
    if s.event_log is not None:
        if not s.available_now:
            # Spark's file source reads each file once, when it first lists it: what a live
            # capture appends to its current file afterwards would never be read.
            raise StreamingError(
                "--event-log reads a captured log as it stands: add --available-now "
                "(to follow a live capture, read its topic with --bootstrap-servers)"
            )
        return LogInput(s.event_log)
    if kafka is not None:
        return KafkaInput(
            kafka,
            s.topic,
            s.starting_offsets,
            max_records_per_batch=s.max_records_per_batch,
            registry_url=s.schema_registry,
        )
    raise StreamingError("give --bootstrap-servers (the changes topic) or --event-log DIR")


@stream.command("alerts")
@job_options
@click.option(
    "--alerts-topic", default="zkcdc.alerts", show_default=True, help="Where alerts are published."
)
@click.option("--no-publish", is_flag=True, help="Publish neither alerts nor state to Kafka.")
@click.option("--no-state", is_flag=True, help="Do not publish the state topic.")
@click.option("--alerts-out", type=click.Path(dir_okay=False, path_type=Path), callback=output_file,
              help="Append alerts as JSON lines to this file.")  # fmt: skip
@click.option("--console", is_flag=True, help="Print alerts as JSON lines.")
@click.option("--alertmanager", metavar="URL", help="Forward to Alertmanager's API v2.")
@click.option("--alertmanager-resend-s", type=click.FloatRange(min=0.1), default=60.0,
              show_default=True, help="Firing alerts are sent again this often (endsAt 4 "
              "resends ahead), as Prometheus does.")  # fmt: skip
@click.option(
    "--webhook",
    "webhooks",
    metavar="URL",
    multiple=True,
    callback=webhook_urls,
    help="POST every alert to this URL (repeatable); kept and retried until taken.",
)
@click.option(
    "--webhook-format",
    type=click.Choice(FORMATS),
    default="json",
    show_default=True,
    help='json: the alert record; slack: Slack\'s incoming-webhook {"text": ...}.',
)
@click.option("--delivery-max-backoff-s", type=click.FloatRange(min=0.1), default=30.0,
              show_default=True, help="Alertmanager or a webhook down: asked again after 1, 2, "
              "4 ... s, up to this.")  # fmt: skip
@click.pass_context
def alerts_command(ctx: click.Context, /, **params: Any) -> None:
    """Raise FIRING/RESOLVED alerts (docs/reference/rules.md) from the change records, and keep
    the live state on the state topic."""
    s = load_stream_settings(given_flags(ctx, params))
    kafka = _kafka(s)
    publish = kafka if kafka and not s.no_publish else None
    sinks = SinkOptions(
        publish, s.alerts_topic, s.alerts_out, s.console, s.alertmanager,
        s.alertmanager_resend_s, s.webhooks, s.webhook_format, s.delivery_max_backoff_s,
    )  # fmt: skip
    run_job("alerts", sinks, bool(publish) and not s.no_state, kafka, s)


@stream.command("state")
@job_options
@click.pass_context
def state_command(ctx: click.Context, /, **params: Any) -> None:
    """Keep only the live state on the state topic (the alert job does this too)."""
    s = load_stream_settings(given_flags(ctx, params))
    kafka = _kafka(s)
    if kafka is None:
        raise StreamingError("the state topic needs --bootstrap-servers")
    run_job("state", SinkOptions(), True, kafka, s)


@stream.command("history")
@click.option("--lake", metavar="URI", help="The lake: a folder, or s3a://, abfss://, hdfs:// "
              "... as Spark's Hadoop is configured for.")  # fmt: skip
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML settings: the [stream] table (or the top level), under the "
              "environment (ZKCDC_<SETTING>) and the flags [env ZKCDC_CONFIG_FILE].")  # fmt: skip
@click.option("--bootstrap-servers", help="Kafka: read the changes topic.")
@kafka_config_options
@click.option("--topic", default="zkcdc.changes", show_default=True, help="The changes topic.")
@click.option("--event-log", type=click.Path(file_okay=False, path_type=Path),
              help="Read event-log files from this folder instead of Kafka (with --available-now).")  # fmt: skip
@click.option("--checkpoint", type=click.Path(file_okay=False, path_type=Path),
              help="Checkpoint folder [default ~/.local/state/zkcdc/stream/history].")  # fmt: skip
@click.option("--master", default="local[2]", show_default=True,
              help="Spark master: local[N] or spark://HOST:PORT.")  # fmt: skip
@click.option("--driver-memory", default="512m", show_default=True, callback=jvm_memory,
              help="The Spark driver's heap (in local mode it runs the tasks too).")  # fmt: skip
@click.option("--available-now", is_flag=True, help="Process what is there now, then stop.")
@click.option("--starting-offsets", default="earliest", show_default=True,
              help="Where a first start (no checkpoint) reads the topic from.")  # fmt: skip
@click.option("--max-records-per-batch", default=100_000, show_default=True,
              help="Kafka input: at most this many records per micro-batch.")  # fmt: skip
@click.option("--alerts-topic", default="zkcdc.alerts", show_default=True,
              help="Kafka input: the alerts topic, kept as the `alerts` table.")  # fmt: skip
@click.pass_context
def history_command(ctx: click.Context, /, **params: Any) -> None:
    """Keep the lake's tables from the change records (`changes`) and the alerts topic
    (`alerts`), exactly once: the control plane's past for `zkcdc history`."""
    s = load_stream_settings(given_flags(ctx, params))
    if not s.lake:
        raise StreamingError("give --lake URI: where the history's tables are kept")
    kafka = _kafka(s)
    source = _source(s, kafka)
    options = HistoryJobOptions(
        source=source,
        lake=s.lake,
        checkpoint=s.checkpoint or default_checkpoint("history"),
        master=s.master,
        driver_memory=s.driver_memory,
        available_now=s.available_now,
        alerts_topic=s.alerts_topic if kafka is not None and s.event_log is None else None,
    )
    logs.configure()
    run_history(options, _stop_on_signals())


@click.group("state")
def state_group() -> None:
    """The live cluster state the streaming job keeps on the state topic."""


@state_group.command("show")
@click.option("--bootstrap-servers", help="Kafka holding the state topic.")
@kafka_config_options
@click.option(
    "--state-topic",
    default="zkcdc.state",
    show_default=True,
    help="The compacted topic of the live state.",
)
@click.option("--cluster", help="Which cluster (needed when the topic holds several).")
@click.option("--json", "as_json", is_flag=True, help="Print the entities as JSON lines.")
@click.option("--limit", default=50, show_default=True, help="Partitions listed per table.")
def show_command(
    bootstrap_servers: str | None,
    kafka_config_file: Path | None,
    kafka_config: dict[str, str],
    state_topic: str,
    cluster: str | None,
    as_json: bool,
    limit: int,
) -> None:
    """Render a cluster's current state: brokers, controller, under-replicated and offline
    partitions, preferred-leader share per broker, consumer groups."""
    kafka = kafka_connection.load(bootstrap_servers, kafka_config_file, kafka_config)
    if kafka is None:
        raise StreamingError("give --bootstrap-servers (or --kafka-config-file with it)")
    skipped = UnreadableMessages("state show")
    latest = read_state(kafka, state_topic, skipped=skipped)
    name = choose_cluster(latest, cluster)
    if as_json:
        for key, value in sorted(latest.items()):
            if key.startswith(f"{name}/"):
                click.echo(json.dumps(value, sort_keys=True))
    else:
        view = ClusterView.of(name, latest, limit)
        console = Console()
        console.print(view.summary())
        for table in view.tables():
            console.print(table)
    if skipped.count:
        click.echo(f"{state_topic}: {skipped.summary()}", err=True)
