"""`zkcdc replay PATH`: into Kafka (`--bootstrap-servers`), through the alert rules
(`--alerts-out`) or into the lake (`--lake`)."""

from __future__ import annotations

import contextlib
import hashlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from zkcdc.capture.delivery.event_log import Damage, log_files, scan_blocks
from zkcdc.capture.kraft.history import metadata_history
from zkcdc.capture.txnlog.data_dir import LogDamage
from zkcdc.capture.txnlog.history import history, write_event_log
from zkcdc.ground import kafka_connection, logs
from zkcdc.ground.cli_options import output_file, rule_overrides_option, shards_option
from zkcdc.ground.command_settings import given_flags
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.kafka_options import kafka_config_options
from zkcdc.ground.user_dirs import state_home
from zkcdc.replay.alerts_replay import replay_alerts
from zkcdc.replay.errors import ReplayError
from zkcdc.replay.kafka_replay import Checkpoint, ReplayToKafka
from zkcdc.replay.lake_replay import replay_into_lake
from zkcdc.replay.replay_settings import load as load_replay_settings
from zkcdc.streaming.rules.rule_settings import RuleSettings


def default_checkpoint(log: Path, bootstrap: str, topic: str) -> Path:
    ident = f"{log.resolve()}|{bootstrap}|{topic}"
    name = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return state_home() / "replay" / f"{name}.json"


def _report(damage: Damage) -> None:
    click.echo(f"zkcdc: {damage.describe()}", err=True)


@click.command()
@click.argument("path", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML settings: the [replay] table (or the top level), under the "
              "environment (ZKCDC_REPLAY_<SETTING>) and the flags [env ZKCDC_CONFIG_FILE].")  # fmt: skip
@click.option("--from-txnlog", "txnlog", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Instead of PATH: a ZooKeeper data dir (or a copy), its whole retained history.")  # fmt: skip
@click.option("--chroot", default="", help="With --from-txnlog: Kafka's chroot, e.g. /kafka.")
@click.option("--from-metadata-log", "metadata_log",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Instead of PATH: a KRaft __cluster_metadata-0 folder (or a copy), its history.")  # fmt: skip
@click.option("--cluster", help="With --from-txnlog or --from-metadata-log: the cluster's name "
              "[default: /cluster/id, or the KRaft cluster id].")  # fmt: skip
@click.option("--bootstrap-servers", help="Re-publish the records to this Kafka.")
@kafka_config_options
@click.option(
    "--topic",
    default="zkcdc.changes",
    show_default=True,
    help="The changes topic the records are published to.",
)
@click.option(
    "--schema-registry",
    metavar="URL",
    help="Into Kafka in Confluent's wire format, the schema registered there.",
)
@click.option("--speed", type=float, default=0.0, show_default=True,
              help="Original pacing times this factor; 0 = as fast as possible.")  # fmt: skip
@click.option("--checkpoint", type=click.Path(dir_okay=False, path_type=Path),
              help="Resume file [default: per log, Kafka and topic, in zkcdc's state dir].")  # fmt: skip
@click.option("--from-start", is_flag=True, help="Forget a previous replay's progress.")
@click.option("--alerts-out", type=click.Path(dir_okay=False, path_type=Path), callback=output_file,
              help="Run the alert rules over the log; write the alerts as JSON lines.")  # fmt: skip
@click.option("--state-out", type=click.Path(dir_okay=False, path_type=Path), callback=output_file,
              help="With --alerts-out: write the final cluster state as JSON lines.")  # fmt: skip
@click.option("--lake", metavar="URI", help="Write the records into the lake's tables (as "
              "`zkcdc stream history`): a folder, or s3a://, abfss://, hdfs:// ...")  # fmt: skip
@rule_overrides_option("Override a rule setting (with --alerts-out).")
@click.option("--master", default="local[2]", show_default=True, help="Spark master.")
@shards_option(
    "With --alerts-out: as `zkcdc stream alerts --shards`; auto: one group per cluster "
    "(0) up to 250,000 znodes a cluster, the sharded layout past that."
)
@click.pass_context
def replay(ctx: click.Context, /, path: Path | None, **params: Any) -> None:
    """Replay a captured event log (file or folder) into Kafka or through the alert rules."""
    s = load_replay_settings(given_flags(ctx, params))
    txnlog, metadata_log, alerts_out, state_out = (
        s.txnlog,
        s.metadata_log,
        s.alerts_out,
        s.state_out,
    )
    if sum(given is not None for given in (path, txnlog, metadata_log)) != 1:
        raise ReplayError(
            "give an event log PATH, --from-txnlog DIR or --from-metadata-log DIR (one of them)"
        )
    kafka = kafka_connection.load(s.bootstrap_servers, s.kafka_config_file, s.kafka_pairs())
    if sum(bool(target) for target in (kafka, alerts_out, s.lake)) != 1:
        raise ReplayError(
            "give one of --bootstrap-servers (into Kafka), --alerts-out FILE or --lake URI"
        )
    if s.speed < 0:
        raise ReplayError("--speed must be 0 (as fast as possible) or more")
    if state_out is not None and alerts_out is None:
        raise ReplayError("--state-out goes with --alerts-out")
    if s.shards is not None and alerts_out is None:
        raise ReplayError("--shards goes with --alerts-out")
    with _event_log(path, txnlog, s.chroot, s.cluster, metadata_log) as (
        log,
        identity,
        txnlog_damage,
    ):
        if not log_files(log):
            raise ReplayError(f"no event log files in {log}")
        if s.lake is not None:
            logs.configure()  # the job's progress on stderr
            damaged = replay_into_lake(log, s.lake, s.master, _report, s.rules)
            click.echo(f"zkcdc: {log} written into the lake at {s.lake}", err=True)
        elif alerts_out is not None:
            logs.configure()  # the job's progress: a JSON line per micro-batch on stderr
            settings = RuleSettings().with_overrides(s.rules)
            damaged = replay_alerts(
                log, alerts_out, state_out, settings, s.master, _report, partition_shards=s.shards
            )
            lines = alerts_out.read_text().count("\n")
            click.echo(f"zkcdc: {lines} alerts written to {alerts_out}", err=True)
        else:
            assert kafka is not None
            file = s.checkpoint or default_checkpoint(identity, kafka.bootstrap_servers, s.topic)
            damaged = _into_kafka(
                log, kafka, s.topic, s.speed, file, s.from_start, s.schema_registry
            )
    if damaged:
        click.echo(
            f"zkcdc: {len(damaged)} damaged file(s): their valid records were used", err=True
        )
    if damaged or txnlog_damage:
        sys.exit(1)


@contextlib.contextmanager
def _event_log(
    path: Path | None,
    txnlog: Path | None,
    chroot: str,
    cluster: str | None,
    metadata_log: Path | None = None,
) -> Iterator[tuple[Path, Path, list[LogDamage | str]]]:
    """The event log to replay, the path that names the replay (its default checkpoint), and
    the damage found in Kafka's files: PATH itself, or the retained history of a ZooKeeper data
    dir or of a KRaft metadata log written to a temporary event log."""

    def problem(text: str) -> None:
        click.echo(f"zkcdc: {text}", err=True)

    if metadata_log is not None:
        noted: list[LogDamage | str] = []

        def note(text: str) -> None:
            noted.append(text)
            problem(text)

        with tempfile.TemporaryDirectory(prefix="zkcdc-metadata-log-") as scratch:
            log = Path(scratch) / "events"
            count = write_event_log(metadata_history(metadata_log, cluster, note), log)
            click.echo(f"zkcdc: {count} records from the metadata log in {metadata_log}", err=True)
            yield log, metadata_log, noted
        return
    if txnlog is None:
        assert path is not None
        yield path, path, []
        return

    damaged: list[LogDamage | str] = []
    with tempfile.TemporaryDirectory(prefix="zkcdc-txnlog-") as scratch:
        log = Path(scratch) / "events"
        count = write_event_log(history(txnlog, chroot, cluster, problem, damaged.append), log)
        click.echo(f"zkcdc: {count} records from the transaction logs in {txnlog}", err=True)
        for damage in damaged:
            assert not isinstance(damage, str)
            click.echo(f"zkcdc: {damage.describe()}", err=True)
        yield log, txnlog, damaged


def _into_kafka(
    path: Path,
    kafka: KafkaConnection,
    topic: str,
    speed: float,
    file: Path,
    from_start: bool,
    registry: str | None,
) -> list[Damage]:
    checkpoint = Checkpoint(file) if from_start else Checkpoint.load(file)
    if checkpoint.done:
        raise ReplayError(
            f"{path} was replayed into {topic} already ({file}); --from-start sends it again"
        )
    damaged: list[Damage] = []
    total = scan_blocks(path).records
    with click.progressbar(length=total, label="replaying", file=sys.stderr, show_pos=True) as bar:
        job = ReplayToKafka(path, kafka, topic, checkpoint, speed, bar.update, damaged.append,
                            registry=registry)  # fmt: skip
        job.run()
    for damage in damaged:
        _report(damage)
    click.echo(f"zkcdc: {job.sent} records sent to {topic}, {job.skipped} sent before", err=True)
    return damaged
