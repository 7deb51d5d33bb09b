"""Every `zkcdc simulate run` scenario against the real ZooKeeper, with `zkcdc capture` watching:
the events the scenario's expectation (`--expect`) names show up in capture's records, in the
order the scenario caused them. Then the alert job (Spark) runs over all the scenarios' records
at once (one cluster name per scenario) and raises exactly the alerts each expectation names."""

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
from capture_harness import ChangesTopic
from simulate_harness import build_cluster

from zkcdc.simulate.alert_forecast import SEVERITY
from zkcdc.simulate.scenarios import SCENARIOS
from zkcdc.streaming.rules.rule_settings import RuleSettings

pytestmark = pytest.mark.integration


# Short for-durations so a scenario's conditions fire within HOLD_S; offline fires at once.
RULES = [
    f"--rule={f}=2000"
    for f in RuleSettings.model_fields
    if f.endswith("_for_ms") and f != "offline_partition_for_ms"
] + ["--rule=leader_election_storm_changes=5"]
HOLD_S = 6.0
EXTRA = {
    "consumer-leaves": ["--no-rebalance"],
    "storm": ["--rate", "40", "--duration", "1"],
}
# scenario -> (expectation, wall-clock ms when its run was stopped)
RUNS: dict[str, tuple[dict[str, Any], int]] = {}


@pytest.fixture(scope="module")
def shared_changes(cluster) -> Any:
    topic = ChangesTopic(cluster.bootstrap_servers, f"zkcdc.changes.scenarios-{os.getpid()}")
    yield topic
    topic.close()


def simulate(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "simulate", *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _matches(event: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(event.get(k) == v for k, v in expected.items() if k not in ("path", "together"))


def find_in_order(records: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[str]:
    """The expected events not found: each must come in a live record at its path, no earlier
    than the one before it (events of one record share a seq), except that events marked
    `together` (one ZooKeeper transaction) may come in either order."""
    missing, floor, after = [], 0, 0
    for want in expected:
        lower = floor if want.get("together") else after
        hit = next(
            (
                r["seq"]
                for r in records
                if r["op"] != "READ"
                and r["seq"] >= lower
                and r["path"] == want["path"]
                and any(_matches(e, want) for e in r["events"])
            ),
            None,
        )
        if hit is None:
            missing.append(json.dumps(want))
        else:
            floor, after = lower, max(after, hit)
    return missing


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_causes_the_events_its_expectation_names(
    scenario, cluster, zk_chroot, start_capture, shared_changes, tmp_path
):
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    log = tmp_path / "simulate.log"
    build_cluster(connect, brokers=4, topics=2, partitions=4)
    name = f"sim-{scenario}"
    daemon = start_capture(connect, "--cluster", name, publish_to=shared_changes)
    daemon.wait_logged("in sync")

    expect_file = tmp_path / "expect.json"
    extra = EXTRA.get(scenario, ["--rate", "4", "--duration", "1"])
    run = simulate(
        "run", scenario, "--zookeeper", connect, "--hold", "300", "--expect", str(expect_file),
        *extra, *RULES, log=log,
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
        while missing := find_in_order(
            [r for r in shared_changes.records if r["cluster"] == name], expectation["events"]
        ):
            assert time.monotonic() < deadline, (
                f"{len(missing)} expected events never captured, first {missing[0]}\n"
                f"{log.read_text()}"
            )
            shared_changes.poll()
        time.sleep(HOLD_S)  # the conditions' for-durations pass, heartbeats mark the time
        stopped_ms = time.time_ns() // 1_000_000
    finally:
        run.send_signal(signal.SIGTERM)
        code = run.wait(60)
    assert code == 0, log.read_text()
    RUNS[scenario] = (expectation, stopped_ms)


def test_the_alert_job_raises_exactly_the_alerts_each_scenario_expects(
    cluster, shared_changes, tmp_path
):
    assert len(RUNS) == len(SCENARIOS), f"scenarios that did not run: {set(SCENARIOS) - set(RUNS)}"
    alerts_file = tmp_path / "alerts.jsonl"
    log = tmp_path / "alerts.log"
    job = subprocess.run(
        [sys.executable, "-m", "zkcdc", "stream", "alerts",
         "--bootstrap-servers", cluster.bootstrap_servers, "--topic", shared_changes.topic,
         "--no-publish", "--alerts-out", str(alerts_file), "--available-now",
         "--checkpoint", str(tmp_path / "checkpoint"), *RULES],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, timeout=600,
    )  # fmt: skip
    assert job.returncode == 0, log.read_text()[-5000:]
    alerts = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    problems = []
    for scenario, (expectation, stopped_ms) in sorted(RUNS.items()):
        expected = {(a["rule"], a["entity"]) for a in expectation["alerts"]}
        raised = {
            (a["rule"], a["entity"])
            for a in alerts
            if a["cluster"] == f"sim-{scenario}"
            and a["status"] == "FIRING"
            and a["started_ms"] < stopped_ms  # the run's own shutdown comes after
        }
        if raised != expected:
            problems.append(
                f"{scenario}: missing {sorted(expected - raised)}, unexpected "
                f"{sorted(raised - expected)}"
            )
    assert not problems, "\n".join(problems)
    covered = {a["rule"] for _, (e, _) in RUNS.items() for a in e["alerts"]}
    assert covered == set(SEVERITY), f"rules no scenario raises: {set(SEVERITY) - covered}"
