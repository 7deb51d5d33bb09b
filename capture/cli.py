"""`zkcdc capture` (the daemon) and `zkcdc events cat|stats` (reading its event logs)."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from zkcdc.capture import failpoints
from zkcdc.capture.delivery.event_log import Damage, EventLogError, log_files, read_records
from zkcdc.capture.errors import CaptureError
from zkcdc.capture.record_filter import LogStats, RecordFilter, parse_time
from zkcdc.capture.settings import load_settings
from zkcdc.capture.txnlog.data_dir import LogDamage
from zkcdc.ground import allocator, logs
from zkcdc.ground.change_types import EventType, Op
from zkcdc.ground.cli_options import option_group
from zkcdc.ground.kafka_options import kafka_config_options


@click.command()
@click.option("--zookeeper", help="HOST:PORT[,..][/chroot] of Kafka's tree [env ZKCDC_ZOOKEEPER].")
@click.option(
    "--source",
    type=click.Choice(["watch", "txnlog", "kraft"]),
    help="watch: a ZooKeeper client's watches [default]; txnlog: a ZooKeeper server's own "
    "snapshot and transaction logs (run beside it), every version with its exact zxid; "
    "kraft: a KRaft node's metadata log (run beside it), every committed record.",
)
@click.option(
    "--metadata-log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="--source kraft: the node's __cluster_metadata-0 folder.",
)
@click.option(
    "--take-over",
    is_flag=True,
    default=None,
    help="--source kraft: go on from the changes topic's stream (a ZooKeeper capture's, on "
    "another host) after a migration to KRaft: seq goes on, only differences are given.",
)
@click.option(
    "--bootstrap-controllers",
    help="--source kraft: HOST:PORT of controllers (or brokers) asked how far the metadata log "
    "is committed [default: --bootstrap-servers].",
)
@click.option(
    "--zk-data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="--source txnlog: ZooKeeper's dataDir (or dataLogDir).",
)
@click.option(
    "--chroot", help="--source txnlog: Kafka's chroot, e.g. /kafka [default: of --zookeeper]."
)
@click.option("--bootstrap-servers", help="Kafka to publish to; without it, the event log only.")
@click.option("--topic", help="Changes topic [default zkcdc.changes].")
@click.option(
    "--accept-partition-count",
    is_flag=True,
    default=None,
    help="Publish into a changes topic whose partition count changed since the last run "
    "(one path's records then span two partitions; their order across them is lost).",
)
@click.option(
    "--transactions/--no-transactions",
    default=None,
    help="Publish in Kafka transactions, fencing a daemon that lost its term [default: on]; "
    "--no-transactions keeps idempotent publishing for a Kafka that refuses transactions.",
)
@click.option(
    "--transactional-id",
    help="The producer's transactional.id [default: zkcdc-capture.TOPIC.CLUSTER]: the same on "
    "every daemon of a cluster's stream.",
)
@click.option(
    "--commit-interval-ms",
    type=int,
    help="A transaction commits once its first record has waited this long, or once it holds "
    "--commit-records [default 10000]; 0 [default]: as soon as no commit is under way.",
)
@click.option("--commit-records", type=int, help="Most records in one transaction [10000].")
@click.option(
    "--event-log", type=click.Path(file_okay=False, path_type=Path), help="Event log folder."
)
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), help="Saved state.")
@click.option("--cluster", help="Cluster name [default: Kafka's /cluster/id].")
@click.option("--schema-registry", help="Confluent Schema Registry URL: Confluent wire format.")
@click.option("--metrics-port", type=int, help="Serve /metrics, /healthz, /livez on this port.")
@click.option("--metrics-host", help="Address the metrics port binds [default 127.0.0.1].")
@click.option(
    "--metrics-web-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TLS and basic auth of the metrics port (Prometheus exporters' web-config YAML).",
)
@click.option("--heartbeat-s", type=float, help="Seconds between HEARTBEAT records [default 1].")
@click.option("--ha-path", help="ZooKeeper path of the active/standby election [/zkcdc/capture].")
@click.option(
    "--watch-mode",
    type=click.Choice(["recursive", "one-shot"]),
    help="recursive: one persistent watch, every write announced (ZooKeeper 3.6+) [default]; "
    "one-shot: a watch per znode.",
)
@click.option("--session-timeout-s", type=float, help="ZooKeeper session timeout [default 10].")
@click.option("--wait", is_flag=True, default=None, help="Retry unreachable servers with backoff.")
@kafka_config_options
@click.option(
    "--zookeeper-config-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="ZooKeeper TLS and SASL/digest settings (secrets go here) "
    "[env ZKCDC_ZOOKEEPER_CONFIG_FILE].",
)
@click.option(
    "--keep-secrets",
    is_flag=True,
    default=None,
    help="Record SCRAM credentials and password configs as ZooKeeper holds them (forensics; "
    "by default they are replaced by digests).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="TOML config file.",
)
def capture(config_file: Path | None, **flags: Any) -> None:
    """Capture every change of Kafka's ZooKeeper tree until SIGTERM/SIGINT."""
    from zkcdc.capture.runner import CaptureRunner

    if config_file is not None and not config_file.is_file():
        raise click.BadParameter(f"{config_file} does not exist", param_hint="--config")
    settings = load_settings(config_file, **flags)
    allocator.bound_arenas()  # before any client's thread: its memory stays flat over terms
    failpoints.arm_from_environment()
    logs.configure()
    if settings.keep_secrets:
        logs.get("zkcdc.capture").warning(
            "--keep-secrets: SCRAM credentials and password configs go into the records, the "
            "event log and Kafka as they are; guard those as secrets"
        )
    runner = CaptureRunner(settings)
    runner.install_signal_handlers()
    runner.run()


@click.group()
def events() -> None:
    """Read event logs."""


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None or k in _ALWAYS}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# Envelope fields printed even when null; event fields only when set, to stay readable.
_ALWAYS = {"before", "after", "zxid", "data", "session_id"}


def _line(record: dict[str, Any]) -> str:
    kinds = ",".join(e["type"] for e in record["events"]) or "-"
    version = record["after"]["version"] if record["after"] else "-"
    return (
        f"{record['seq']:>8} {record['ts_ms']} {record['op']:<9} {record['path'] or '(heartbeat)'}"
        f" v{version} skipped={record['versions_skipped']} {kinds}"
    )


def read_source(
    path: Path | None,
    txnlog: Path | None,
    chroot: str,
    keep: RecordFilter,
    metadata_log: Path | None = None,
) -> Iterator[dict[str, Any]]:
    """The records (of an event log, a ZooKeeper data dir's files or a KRaft metadata log's)
    that `keep` accepts; damage is reported on stderr at the end, and then the command exits 1."""
    damaged: list[Damage | LogDamage | str] = []
    records: Iterator[dict[str, Any]]
    if sum(given is not None for given in (path, txnlog, metadata_log)) != 1:
        raise CaptureError(
            "give an event log PATH, --from-txnlog DIR or --from-metadata-log DIR (one of them)"
        )
    if metadata_log is not None:
        from zkcdc.capture.kraft.history import metadata_history

        found_kraft = metadata_history(metadata_log, keep.cluster, damaged.append)
        records = (r.to_avro() for r in found_kraft)
    elif txnlog is not None:
        from zkcdc.capture.txnlog.history import history

        def problem(text: str) -> None:
            click.echo(f"zkcdc: {text}", err=True)

        found = history(txnlog, chroot, keep.cluster, problem, damaged.append)
        records = (r.to_avro() for r in found)
    else:
        assert path is not None
        if not log_files(path):
            raise EventLogError(f"no event log files in {path}")
        records = read_records(path, damaged.append)
    yield from (r for r in records if keep(r))
    for damage in damaged:
        text = damage if isinstance(damage, str) else damage.describe()
        click.echo(f"zkcdc: {text}", err=True)
    if damaged:
        sys.exit(1)


def time_value(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Click callback for a ZooKeeper time option (epoch ms or ISO 8601)."""
    try:
        return None if value is None else parse_time(value)
    except CaptureError as exc:
        raise click.BadParameter(str(exc)) from exc


def _types(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    known = {op.value for op in Op} | {t.value for t in EventType}
    unknown = [t for t in value if t.upper() not in known]
    if unknown:
        raise click.BadParameter(
            f"{', '.join(unknown)}: not an op or event type (e.g. UPDATE, ISR_SHRUNK; "
            f"all: {', '.join(sorted(known))})"
        )
    return value


source_options = option_group(
    click.argument("path", required=False, type=click.Path(exists=True, path_type=Path)),
    click.option("--from-txnlog", "txnlog", type=click.Path(exists=True, file_okay=False,
                 path_type=Path), help="Instead of PATH: a ZooKeeper data dir (or a copy of it)."),
    click.option("--chroot", default="", help="With --from-txnlog: Kafka's chroot, e.g. /kafka."),
    click.option("--from-metadata-log", "metadata_log", type=click.Path(exists=True,
                 file_okay=False, path_type=Path),
                 help="Instead of PATH: a KRaft __cluster_metadata-0 folder (or a copy of it)."),
)  # fmt: skip

filter_options = option_group(
    click.option("--path-prefix", help="Only records of znodes under this path."),
    click.option("--type", "types", multiple=True, metavar="TYPE", callback=_types,
                 help="Only records with this op (UPDATE) or event type (ISR_SHRUNK); "
                 "repeat for several."),
    click.option("--since", callback=time_value, metavar="TIME",
                 help="ZooKeeper time from (epoch ms or ISO 8601)."),
    click.option("--until", callback=time_value, metavar="TIME",
                 help="ZooKeeper time up to, excluded."),
    click.option("--cluster", help="Only this cluster's records."),
)  # fmt: skip


def record_filter(
    path_prefix: str | None,
    types: tuple[str, ...],
    since: int | None,
    until: int | None,
    cluster: str | None,
) -> RecordFilter:
    return RecordFilter(path_prefix, frozenset(t.upper() for t in types), since, until, cluster)


@events.command("cat")
@source_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@filter_options
def cat(
    path: Path | None,
    txnlog: Path | None,
    chroot: str,
    metadata_log: Path | None,
    as_json: bool,
    **filters: Any,
) -> None:
    """Print the records of an event log file or folder (or of a ZooKeeper data dir, or of a
    KRaft metadata log)."""
    try:
        for record in read_source(path, txnlog, chroot, record_filter(**filters), metadata_log):
            click.echo(json.dumps(_plain(record)) if as_json else _line(record))
    except BrokenPipeError:
        sys.stderr.close()


@events.command("stats")
@source_options
@click.option("--json", "as_json", is_flag=True, help="The counts as one JSON object.")
@filter_options
def stats(
    path: Path | None,
    txnlog: Path | None,
    chroot: str,
    metadata_log: Path | None,
    as_json: bool,
    **filters: Any,
) -> None:
    """Counts by op and event type, time span, seq range and versions skipped of a log."""
    counted = LogStats()
    try:
        for record in read_source(path, txnlog, chroot, record_filter(**filters), metadata_log):
            counted.add(record)
    finally:
        if as_json:
            click.echo(json.dumps(counted.as_json()))
        else:
            for line in counted.lines():
                click.echo(line)
