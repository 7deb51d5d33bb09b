"""Every `zkcdc simulate run` scenario against the real ZooKeeper, with `zkcdc capture` watching:
the events the scenario's expectation (`--expect`) names show up in capture's records, in the
order the scenario caused them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from zkcdc.simulate.scenarios import SCENARIOS

pytestmark = pytest.mark.integration


def simulate(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "simulate", *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def build_small_cluster(connect: str, log: Path) -> None:
    process = simulate(
        "build", "--zookeeper", connect, "--brokers", "4", "--topics", "2",
        "--partitions-per-topic", "4", "--replication-factor", "3", log=log,
    )  # fmt: skip
    assert process.wait(60) == 0, log.read_text()


def _matches(event: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(event.get(k) == v for k, v in expected.items() if k != "path")


def find_in_order(records: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[str]:
    """The expected events not found: each must come in a live record at its path, no earlier
    than the one before it (events of one record share a seq)."""
    missing, after = [], 0
    for want in expected:
        hit = next(
            (
                r["seq"]
                for r in records
                if r["op"] != "READ"
                and r["seq"] >= after
                and r["path"] == want["path"]
                and any(_matches(e, want) for e in r["events"])
            ),
            None,
        )
        if hit is None:
            missing.append(json.dumps(want))
        else:
            after = hit
    return missing


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_causes_the_events_its_expectation_names(
    scenario, cluster, zk_chroot, start_capture, changes_topic, tmp_path
):
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    log = tmp_path / "simulate.log"
    build_small_cluster(connect, log)
    daemon = start_capture(connect, "--cluster", "sim", publish_to=changes_topic)
    daemon.wait_logged("in sync")

    expect_file = tmp_path / "expect.json"
    extra = ["--no-rebalance"] if scenario == "consumer-leaves" else []
    run = simulate(
        "run", scenario, "--zookeeper", connect, "--rate", "4", "--duration", "1",
        "--hold", "300", "--expect", str(expect_file), *extra, log=log,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not expect_file.exists():
            assert run.poll() is None, f"run exited {run.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no expectation written:\n{log.read_text()}"
            time.sleep(0.1)
        expectation = json.loads(expect_file.read_text())
        assert expectation["scenario"] == scenario
        assert expectation["events"], "a scenario must cause at least one event"

        deadline = time.monotonic() + 60
        while missing := find_in_order(changes_topic.records, expectation["events"]):
            assert time.monotonic() < deadline, (
                f"{len(missing)} expected events never captured, first {missing[0]}\n"
                f"{log.read_text()}"
            )
            changes_topic.poll()
    finally:
        run.send_signal(signal.SIGTERM)
        code = run.wait(60)
    assert code == 0, log.read_text()
