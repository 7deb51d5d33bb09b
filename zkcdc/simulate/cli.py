"""`zkcdc simulate build | run | list`."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from zkcdc.ground.cli_options import option_group, rule_overrides_option
from zkcdc.simulate.alert_forecast import AlertForecast
from zkcdc.simulate.build import BuildOptions, build
from zkcdc.simulate.cluster import SimulatedCluster
from zkcdc.simulate.errors import SimulateError
from zkcdc.simulate.expectation import Expectation
from zkcdc.simulate.scenarios import SCENARIOS, RunOptions
from zkcdc.simulate.topology import ClusterShape
from zkcdc.simulate.zk_writer import close, connect
from zkcdc.streaming.rules.rule_settings import RuleSettings


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _zookeeper_config(_: click.Context, __: click.Parameter, value: Path | None) -> Path | None:
    if value is not None:  # read by every connection the simulator opens (this process's own)
        os.environ["ZKCDC_ZOOKEEPER_CONFIG_FILE"] = str(value)
    return value


_zookeeper = option_group(
    click.option(
        "--zookeeper",
        required=True,
        metavar="HOST:PORT[,..]/CHROOT",
        help="Where the simulated cluster lives, e.g. 127.0.0.1:2181/sim.",
    ),
    click.option(
        "--zookeeper-config-file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        callback=_zookeeper_config,
        expose_value=False,
        help="ZooKeeper TLS and SASL/digest settings [env ZKCDC_ZOOKEEPER_CONFIG_FILE].",
    ),
)
_expect = click.option(
    "--expect",
    "expect_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write what was done and which events and alerts it should cause, as JSON.",
)


@click.group()
def simulate() -> None:
    """Write a Kafka cluster's ZooKeeper tree, and its incidents, as Kafka 3.9 would."""


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGTERM and SIGINT set the event (a wait on it ends) instead of killing the process,
    so the sessions close properly and the brokers go down as a cluster shutting down."""
    stop = threading.Event()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for s in handlers:
        signal.signal(s, on_signal)
    try:
        yield stop
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)


def _hold(cluster: SimulatedCluster, stop: threading.Event, seconds: float | None) -> None:
    if seconds is None or seconds > 0:
        until = "SIGTERM / Ctrl-C" if seconds is None else f"{seconds:g} s or SIGTERM / Ctrl-C"
        click.echo(f"holding the simulated brokers' sessions until {until}", err=True)
        stop.wait(seconds)
    click.echo(f"closing the sessions of brokers {sorted(cluster.sessions)}", err=True)


def _report(expect: Expectation, expect_file: Path | None) -> None:
    for line in expect.summary():
        click.echo(line)
    if expect_file is not None:
        expect.write(expect_file)


@simulate.command("build")
@_zookeeper
@click.option("--brokers", default=6, show_default=True, help="Brokers registered.")
@click.option("--topics", default=200, show_default=True, help="Topics created.")
@click.option("--partitions-per-topic", default=50, show_default=True, help="Partitions of each.")
@click.option("--replication-factor", default=3, show_default=True, help="Replicas of each.")
@click.option("--topic-prefix", default="sim", show_default=True, help="Topics are PREFIX-N.")
@click.option("--seed", default=0, show_default=True, help="Seeds replica placement and ids.")
@click.option("--cluster-id", default=None, help="The /cluster/id to write [default: random].")
@click.option("--force", is_flag=True, help="Replace whatever the chroot holds.")
@click.option(
    "--hold",
    is_flag=True,
    help="Keep the brokers registered (their sessions open) until SIGTERM / Ctrl-C; without "
    "it they go down when build exits, as a cluster shut down.",
)
@_expect
def build_command(
    zookeeper: str,
    brokers: int,
    topics: int,
    partitions_per_topic: int,
    replication_factor: int,
    topic_prefix: str,
    seed: int,
    cluster_id: str | None,
    force: bool,
    hold: bool,
    expect_file: Path | None,
) -> None:
    """Build a cluster's tree: brokers, controller, topics and partition states."""
    shape = ClusterShape(brokers, topics, partitions_per_topic, replication_factor, topic_prefix)
    options = BuildOptions(shape, seed, cluster_id, force)
    total = 21 + brokers + 1 + topics * 3 + shape.partitions * 2
    started = time.monotonic()
    # No _stop_on_signals() here: nothing waits on its event while building, so Ctrl-C must
    # interrupt (build() then closes the sessions it opened).
    with click.progressbar(length=total, label="building", file=sys.stderr, show_pos=True) as bar:
        cluster = build(zookeeper, options, now_ms, bar.update)
    try:
        elapsed = time.monotonic() - started
        cluster.expect.step(f"{total} znodes written in {elapsed:.1f} s")
        _report(cluster.expect, expect_file)
        with _stop_on_signals() as stop:
            _hold(cluster, stop, None if hold else 0)
    finally:
        cluster.close()
        close(cluster.client)


@simulate.command("run")
@click.argument("scenario", type=click.Choice(sorted(SCENARIOS)), metavar="SCENARIO")
@_zookeeper
@click.option("--rate", default=5.0, show_default=True, help="Changes per second (repeating).")
@click.option("--duration", default=5.0, show_default=True, help="Seconds a repeating one runs.")
@click.option("--broker", type=int, default=None, help="The broker to act on [default: chosen].")
@click.option("--topic", default=None, help="The topic to act on [default: chosen].")
@click.option("--group", default="sim-group", show_default=True, help="Legacy consumer group.")
@click.option("--rebalance/--no-rebalance", default=True, help="consumer-leaves: rebalance after.")
@click.option("--seed", default=0, show_default=True, help="The same seed, the same run.")
@click.option(
    "--hold",
    "hold_s",
    default=0.0,
    show_default=True,
    help="Seconds to keep the brokers' sessions after the scenario (alerts need time).",
)
@rule_overrides_option(
    "Rule settings the expected alerts are judged by (as for `zkcdc stream alerts`)."
)
@_expect
def run_command(
    scenario: str,
    zookeeper: str,
    rate: float,
    duration: float,
    broker: int | None,
    topic: str | None,
    group: str,
    rebalance: bool,
    seed: int,
    hold_s: float,
    rules: dict[str, str],
    expect_file: Path | None,
) -> None:
    """Stage SCENARIO on a built cluster (`zkcdc simulate list` names them).

    The run brings the cluster's brokers up (a session each) and elects a controller if none
    is, stages the incident, prints what it did and expects, holds for --hold seconds, then
    closes its sessions."""
    if rate <= 0 or duration < 0:
        raise SimulateError("--rate must be > 0 and --duration >= 0")
    function, _ = SCENARIOS[scenario]
    client = connect(zookeeper)
    forecast = AlertForecast(RuleSettings().with_overrides(rules), now_ms)
    cluster = SimulatedCluster(zookeeper, client, Expectation("start", forecast=forecast), now_ms)
    try:
        with _stop_on_signals() as stop:

            def sleep(seconds: float) -> None:
                if stop.wait(seconds):
                    raise KeyboardInterrupt

            options = RunOptions(rate, duration, broker, topic, group, rebalance, seed, sleep)
            cluster.load()
            cluster.start()
            for line in cluster.expect.did:
                click.echo(f"start: {line}", err=True)
            if cluster.expect.did:
                # A quiet moment, so watchers see the started cluster before the incident (a
                # registration gone within a read's round trip is invisible to them).
                sleep(1.0)
            # What the cluster's start did is not part of the scenario; its forecast goes on.
            cluster.expect = Expectation(
                scenario, forecast=cluster.expect.forecast, hold_ms=int(hold_s * 1000)
            )
            function(cluster, options)
            _report(cluster.expect, expect_file)
            _hold(cluster, stop, hold_s)
    finally:
        cluster.close()
        close(client)


@simulate.command("list")
def list_command() -> None:
    """The scenarios `run` knows."""
    for name, (_, description) in sorted(SCENARIOS.items()):
        click.echo(f"{name:22} {description}")
