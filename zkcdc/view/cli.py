"""`zkcdc ui`, `zkcdc report` and `zkcdc alerts tail`."""

from __future__ import annotations

import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import click
import orjson
from rich.console import Console

from zkcdc.capture.cli import read_source, record_filter, source_options, time_value
from zkcdc.ground import kafka_connection, logs
from zkcdc.ground.change_values import ChangeValueDecoder, registry_fetcher
from zkcdc.ground.cli_options import rule_overrides_option
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.kafka_options import kafka_config_options
from zkcdc.ground.metrics_server import MetricsServerError, WebConfig
from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.streaming.rules.rule_catalog import RULE_IDS
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.view.alerts_tail import AlertFilter, alert_line, tail
from zkcdc.view.errors import ViewError
from zkcdc.view.live_feeds import LiveFeeds
from zkcdc.view.live_model import LiveModel
from zkcdc.view.report import write_report
from zkcdc.view.topic_follower import TopicFollower
from zkcdc.view.ui_access import BasicAuth, check_exposure


def _kafka(
    bootstrap: str | None, config_file: Path | None, config: dict[str, str]
) -> KafkaConnection:
    kafka = kafka_connection.load(bootstrap, config_file, config)
    if kafka is None:
        raise ViewError("give --bootstrap-servers (or --kafka-config-file with it)")
    return kafka


def _port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ViewError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from exc


@click.command("ui")
@click.option("--bootstrap-servers", help="Kafka holding the state, alerts and changes topics.")
@kafka_config_options
@click.option(
    "--state-topic",
    default="zkcdc.state",
    show_default=True,
    help="The compacted topic of the live state.",
)
@click.option(
    "--alerts-topic",
    default="zkcdc.alerts",
    show_default=True,
    help="The alerts topic, read from its start.",
)
@click.option(
    "--topic",
    default="zkcdc.changes",
    show_default=True,
    help="The changes topic (histories and the records behind an alert).",
)
@click.option("--no-changes", is_flag=True, help="Do not read the changes topic.")
@click.option(
    "--schema-registry",
    metavar="URL",
    help="Read Confluent-framed change records too (writer schema by id).",
)
@click.option(
    "--capture-metrics",
    multiple=True,
    metavar="URL",
    help="A capture daemon's /metrics to show its health (repeatable).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="The page's port.",
)
@click.option(
    "--web-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TLS and basic auth of the page (Prometheus exporters' web-config YAML, as "
    "--metrics-web-config).",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve a non-loopback --host without authentication: anyone who reaches it sees "
    "every broker, topic, config change and alert.",
)
@rule_overrides_option("Rule settings the page uses (default_min_insync_replicas=2).")
@click.option("--lake", metavar="URI", help="Show the past instead, from this lake (`zkcdc "
              "stream history`): pick a moment, see the cluster as it was then.")  # fmt: skip
@click.option("--master", help="With --lake: Spark master, local[N] or spark://HOST:PORT "
              "[default: local[2]].")  # fmt: skip
@click.option("--driver-memory", help="With --lake: the Spark driver's heap [default: 1g].")
def ui_command(
    bootstrap_servers: str | None, kafka_config_file: Path | None, kafka_config: dict[str, str],
    state_topic: str, alerts_topic: str, topic: str, no_changes: bool,
    schema_registry: str | None, capture_metrics: tuple[str, ...], host: str, port: int,
    web_config: Path | None, insecure_no_auth: bool, rules: dict[str, str], lake: str | None,
    master: str | None, driver_memory: str | None,
) -> None:  # fmt: skip
    """A live web view of the clusters zkcdc watches: brokers, controller, partitions, alerts,
    consumer groups and capture health, pushed to the page as they change. With --lake, the
    same page as of a past moment."""
    from zkcdc.view.web_app import app

    try:
        access = WebConfig.load(web_config) if web_config is not None else WebConfig()
    except MetricsServerError as exc:
        raise ViewError(str(exc)) from exc
    check_exposure(host, access, insecure_no_auth)
    if lake is not None:
        if bootstrap_servers:
            raise ViewError("give --lake (the past) or --bootstrap-servers (now), not both")
        _port_free(host, port)
        from zkcdc.history.history_settings import HistorySettings

        spark = HistorySettings.model_fields  # the `history` commands' defaults
        _serve_lake(lake, access, host, port, master or spark["master"].default,
                    driver_memory or spark["driver_memory"].default)  # fmt: skip
        return
    if master or driver_memory:
        raise ViewError("--master and --driver-memory go with --lake (Spark reads the lake)")
    kafka = _kafka(bootstrap_servers, kafka_config_file, kafka_config)
    settings = RuleSettings().with_overrides(rules)
    _port_free(host, port)
    if not kafka.brokers_answering(10):
        raise ViewError(f"no Kafka broker answers at {kafka.describe()}")
    logs.configure()
    model = LiveModel()
    topics = {"state": state_topic, "alerts": alerts_topic}
    if not no_changes:
        topics["changes"] = topic
    registry = registry_fetcher(schema_registry) if schema_registry else None
    feeds = LiveFeeds(kafka, topics, model, list(capture_metrics), ChangeValueDecoder(registry))
    web = BasicAuth(app(model, default_min_isr=settings.default_min_insync_replicas), access)
    try:
        _serve(web, access, host, port)
    finally:
        feeds.close()


def _serve(web: Any, access: WebConfig, host: str, port: int) -> None:
    """The page served until a signal stops it."""
    import uvicorn

    tls = {} if access.cert_file is None else {
        "ssl_certfile": str(access.cert_file), "ssl_keyfile": str(access.key_file)}  # fmt: skip
    server = uvicorn.Server(
        uvicorn.Config(web, host=host, port=port, log_level="warning", **tls)  # type: ignore[arg-type]
    )
    shown_host = f"[{host}]" if ":" in host else host
    scheme = "https" if tls else "http"
    click.echo(f"zkcdc ui: {scheme}://{shown_host}:{port}/", err=True)
    server.run()
    if not server.started:
        raise ViewError(f"cannot serve on {host}:{port}")


def _serve_lake(
    lake: str, access: WebConfig, host: str, port: int, master: str, driver_memory: str
) -> None:
    from zkcdc.streaming.job.spark_session import session
    from zkcdc.streaming.lake.history_queries import read_table
    from zkcdc.streaming.lake.lake_tables import LakeError, Table
    from zkcdc.view.lake_moments import LakeMoments
    from zkcdc.view.web_app import lake_app

    logs.configure()
    spark = session(master, "zkcdc-ui-lake", shuffle_partitions=2, driver_memory=driver_memory,
                    lake=True)  # fmt: skip
    try:
        try:
            read_table(spark, lake, Table.CHANGES)  # a lake that is not one: said before serving
        except LakeError as exc:
            raise ViewError(str(exc)) from exc
        _serve(BasicAuth(lake_app(LakeMoments(spark, lake)), access), access, host, port)
    finally:
        spark.stop()


@click.command("report")
@source_options
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="The HTML file to write.",
)
@click.option("--title", default=None, help="The page's title [default: the log's name].")
@click.option("--since", callback=time_value, metavar="TIME", help="ZooKeeper time from.")
@click.option(
    "--until", callback=time_value, metavar="TIME", help="ZooKeeper time up to, excluded."
)
@click.option("--cluster", help="Only this cluster's records.")
@rule_overrides_option("Override a rule setting, as for `zkcdc stream alerts`.")
def report_command(
    path: Path | None, txnlog: Path | None, chroot: str, metadata_log: Path | None, out: Path,
    title: str | None, since: int | None, until: int | None, cluster: str | None,
    rules: dict[str, str],
) -> None:  # fmt: skip
    """Write an incident view of an event log (or --from-txnlog, --from-metadata-log) as one
    self-contained HTML file: scrub through time, see the state, the changes and the alerts."""
    settings = RuleSettings().with_overrides(rules)
    keep = record_filter(None, (), since, until, cluster)
    records = read_source(path, txnlog, chroot, keep, metadata_log)
    name = title or f"zkcdc incident: {(path or txnlog or metadata_log or Path('log')).name}"
    timeline = write_report(records, out, settings, name)
    click.echo(
        f"{out}: {timeline.records} records, {len(timeline.steps)} changes, "
        f"{sum(len(s.alerts) for s in timeline.steps)} alerts", err=True,
    )  # fmt: skip


@click.group("alerts")
def alerts_group() -> None:
    """The alerts the alert job published."""


@alerts_group.command("tail")
@click.option("--bootstrap-servers", help="Kafka holding the alerts topic.")
@kafka_config_options
@click.option(
    "--alerts-topic",
    default="zkcdc.alerts",
    show_default=True,
    help="The alerts topic, read from its start.",
)
@click.option("-f", "--follow", is_flag=True, help="Keep showing new alerts until interrupted.")
@click.option("--cluster", "clusters", multiple=True, help="Only this cluster (repeatable).")
@click.option("--rule", "rules", multiple=True, help="Only this rule (repeatable).")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["FIRING", "RESOLVED"], case_sensitive=False),
    help="Only FIRING or only RESOLVED.",
)
@click.option(
    "--since",
    callback=time_value,
    metavar="TIME",
    help="Event time from (epoch ms or ISO 8601): a FIRING's start, a RESOLVED's end.",
)
@click.option("--json", "as_json", is_flag=True, help="The alert records as JSON lines.")
def tail_command(
    bootstrap_servers: str | None, kafka_config_file: Path | None, kafka_config: dict[str, str],
    alerts_topic: str, follow: bool, clusters: tuple[str, ...], rules: tuple[str, ...],
    statuses: tuple[str, ...], since: int | None, as_json: bool,
) -> None:  # fmt: skip
    """Show the alerts topic, coloured by severity; --follow keeps reading."""
    unknown = sorted(set(rules) - RULE_IDS)
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: no such rule (rules: "
                                 f"{', '.join(sorted(RULE_IDS))})", param_hint="--rule")  # fmt: skip
    kafka = _kafka(bootstrap_servers, kafka_config_file, kafka_config)
    keep = AlertFilter(frozenset(clusters), frozenset(rules),
                       frozenset(s.upper() for s in statuses), since)  # fmt: skip
    console = Console(highlight=False, soft_wrap=True)

    def show(alert: dict[str, Any]) -> None:
        if as_json:
            sys.stdout.write(orjson.dumps(alert, option=orjson.OPT_SORT_KEYS).decode() + "\n")
            sys.stdout.flush()
        else:
            console.print(alert_line(alert))

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    follower = TopicFollower(kafka, alerts_topic)
    skipped = UnreadableMessages("alerts tail")
    try:
        tail(follower, keep, show, follow, stop, skipped)
    except BrokenPipeError:
        sys.stderr.close()
    finally:
        follower.close()
    if skipped.count:
        click.echo(f"{alerts_topic}: {skipped.summary()}", err=True)
