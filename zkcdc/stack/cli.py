"""`zkcdc stack up | down | status | migrate`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from zkcdc.ground import environment
from zkcdc.ground.cli_options import invalid_setting, key_values
from zkcdc.stack.cluster import LocalStack
from zkcdc.stack.errors import StackError
from zkcdc.stack.migration import PHASES, StackMigration
from zkcdc.stack.settings import StackSettings

_state_dir_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the stack keeps pids, data and logs [env ZKCDC_STACK_STATE_DIR; "
    "default ~/.local/state/zkcdc/stack].",
)


def _settings(**flags: Any) -> StackSettings:
    given = {key: value for key, value in flags.items() if value not in (None, ())}
    if (
        unknown := environment.unknown_in_family("ZKCDC_STACK_", StackSettings.model_fields)
    ) is not None:
        raise StackError(unknown)
    try:
        return StackSettings(**given)
    except ValidationError as exc:
        raise StackError(invalid_setting(exc)) from exc


def _state_dir(given: Path | None) -> Path:
    return given or _settings().state_dir


@click.group()
def stack() -> None:
    """A real local Kafka cluster on loopback: ZooKeeper mode, or KRaft (--mode kraft)."""


@stack.command()
@_state_dir_option
@click.option(
    "--mode",
    type=click.Choice(["zookeeper", "kraft"]),
    help="zookeeper: ZooKeeper and brokers in ZooKeeper mode [default]; kraft: a KRaft "
    "controller quorum and brokers (no ZooKeeper).",
)
@click.option("--controllers", type=int, help="--mode kraft: KRaft controllers [default 3].")
@click.option(
    "--controller-port", type=int, help="--mode kraft: the first controller's port [default 9192]."
)
@click.option("--brokers", type=int, help="Number of Kafka brokers [default 3].")
@click.option(
    "--zookeeper-nodes", type=int, help="ZooKeeper nodes: 1, or 3 for an ensemble [default 1]."
)
@click.option(
    "--zookeeper-port", type=int, help="Client port of the first ZooKeeper node [default 2181]."
)
@click.option(
    "--kafka-port", type=int, help="Port of the first broker; the others follow [default 9092]."
)
@click.option("--chroot", help="Kafka's ZooKeeper chroot [default /kafka].")
@click.option("--kafka-version", help="Apache Kafka 3.9.x version to fetch [default 3.9.2].")
@click.option(
    "--timeout",
    "start_timeout_s",
    type=float,
    help="Seconds to wait for the cluster [default 120].",
)
@click.option(
    "--broker-config",
    multiple=True,
    callback=key_values,
    metavar="KEY=VALUE",
    help="Extra broker property, repeatable (e.g. --broker-config unclean.leader.election.enable=true).",
)
@click.option(
    "--secure",
    is_flag=True,
    default=None,
    help="SASL_SSL brokers (SCRAM-SHA-512), ZooKeeper on TLS with SASL and Kafka's ACLs; "
    "prints the connection files zkcdc's commands take.",
)
@click.option(
    "--schema-registry",
    is_flag=True,
    default=None,
    help="Also a schema registry (Apicurio, Confluent's API; built once with mvn): its URL is "
    "what --schema-registry takes.",
)
@click.option("--schema-registry-port", type=int, help="Its port [default 8081].")
def up(**flags: Any) -> None:
    """Fetch the jars (once), start ZooKeeper and the brokers, wait until all answer."""
    info = LocalStack(_settings(**flags)).up()
    if info.mode == "kraft":
        click.echo(f"controllers: {info.bootstrap_controllers}")
        for directory in info.metadata_log_dirs:
            click.echo(f"metadata log: {directory}  (--metadata-log-dir)")
    else:
        click.echo(f"zookeeper: {info.zookeeper_connect}")
    click.echo(f"bootstrap: {info.bootstrap_servers}")
    click.echo(f"state:     {info.state_dir}")
    if info.schema_registry_url is not None:
        click.echo(f"schema registry: {info.schema_registry_url}  (--schema-registry)")
    if info.kafka_config_file is not None:
        click.echo(f"kafka config:     {info.kafka_config_file}  (--kafka-config-file)")
        click.echo(f"zookeeper config: {info.zookeeper_config_file}  (--zookeeper-config-file)")


@stack.command()
@_state_dir_option
@click.option(
    "--until",
    type=click.Choice(list(PHASES)),
    default="finalized",
    show_default=True,
    help="The last phase to run: controllers, dual-write (brokers rolled with migration; the "
    "metadata copied), kraft-brokers (brokers rolled to KRaft), finalized.",
)
@click.option("--controllers", type=int, help="KRaft controllers to add [default 3].")
@click.option("--controller-port", type=int, help="The first controller's port [default 9192].")
def migrate(
    state_dir: Path | None, until: str, controllers: int | None, controller_port: int | None
) -> None:
    """Take the running ZooKeeper-mode stack to KRaft by Kafka's documented steps, phase by
    phase; a later call goes on from the phase reached."""
    local = LocalStack.open(_state_dir(state_dir))
    reached = StackMigration(local, lambda line: click.echo(line, err=True)).run(
        until, controllers, controller_port
    )
    click.echo(f"migration: {reached}")
    click.echo(f"controllers: {local.layout.bootstrap_controllers}")
    for c in local.layout.controllers:
        click.echo(f"metadata log: {c.metadata_dir}  (--metadata-log-dir)")


@stack.command()
@_state_dir_option
def down(state_dir: Path | None) -> None:
    """Stop exactly the processes `up` started (also after a crash)."""
    directory = _state_dir(state_dir)
    if not (directory / "stack.json").exists():
        click.echo(f"no stack in {directory}: nothing to stop")
        return
    stopped = LocalStack.open(directory).down()
    click.echo(f"stopped {len(stopped)} process(es): {', '.join(stopped) or '-'}")


@stack.command()
@_state_dir_option
def status(state_dir: Path | None) -> None:
    """Processes, brokers, the controller and its epoch, topics."""
    local = LocalStack.open(_state_dir(state_dir))
    alive = local.running()
    if not any(alive.values()):
        raise StackError(f"stack in {local.layout.state_dir} is not running")
    console = Console()
    processes = Table("process", "pid", "running", title="processes")
    for name, record in local.records().items():
        processes.add_row(name, str(record.pid), "yes" if alive[name] else "NO")
    console.print(processes)
    if local.settings.has_controllers:
        console.print(f"controllers: {local.layout.bootstrap_controllers}")
    if local.settings.mode != "kraft":
        console.print(f"zookeeper: {local.layout.zookeeper_connect}")
    if local.settings.migration:
        console.print(f"migration: {local.settings.migration} (zkcdc stack migrate)")
    console.print(f"bootstrap: {local.layout.bootstrap_servers}")
    if (registry := local.info().schema_registry_url) is not None:
        console.print(f"schema registry: {registry}")
    view = local.cluster_view()
    epoch_title = "epoch" if local.settings.kraft_brokers else "epoch (czxid)"
    brokers = Table("broker", "endpoint", epoch_title, title=f"brokers ({len(view.brokers)})")
    for broker in view.brokers:
        brokers.add_row(str(broker.broker_id), broker.endpoint, str(broker.epoch))
    console.print(brokers)
    console.print(f"controller: {view.controller_id}  epoch: {view.controller_epoch}")
    topics = Table("topic", "partitions", "replication", title=f"topics ({len(view.topics)})")
    for topic in view.topics:
        topics.add_row(topic.name, str(topic.partitions), str(topic.replication_factor))
    console.print(topics)
    if not all(alive.values()):
        raise StackError("some processes of the stack are not running")
