"""`zkcdc stack up | status | down` as a user runs it, in a state dir and on ports of its own."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from zkcdc.stack.probes import free_port_block
from zkcdc.stack.processes import find_marked

pytestmark = pytest.mark.integration


def zkcdc(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkcdc", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_up_status_down_with_an_ensemble_and_a_registry_leaves_nothing_running(tmp_path: Path):
    state = tmp_path / "stack"
    ports = ["--zookeeper-port", str(free_port_block(9)), "--kafka-port", str(free_port_block(3)),
             "--schema-registry-port", str(free_port_block(1))]  # fmt: skip
    up = zkcdc("stack", "up", "--state-dir", str(state), "--zookeeper-nodes", "3",
               "--schema-registry", *ports)  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        assert "bootstrap: 127.0.0.1:" in up.stdout
        assert up.stdout.count(",127.0.0.1:") >= 2 + 2  # three ZooKeeper hosts and three brokers
        assert len(find_marked(state.resolve())) == 7
        registry = re.search(r"^schema registry: (\S+)", up.stdout, re.M)
        assert registry, up.stdout
        with urllib.request.urlopen(f"{registry.group(1)}/subjects", timeout=10) as answer:
            assert json.loads(answer.read()) == []

        status = zkcdc("stack", "status", "--state-dir", str(state))
        assert status.returncode == 0, status.stderr
        assert "brokers (3)" in status.stdout
        assert "controller: " in status.stdout
        assert "controller: None" not in status.stdout
        assert "epoch: 1" in status.stdout
        assert f"schema registry: {registry.group(1)}" in status.stdout
        assert "schema-registry" in status.stdout
    finally:
        down = zkcdc("stack", "down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert "stopped 7 process(es)" in down.stdout
    assert find_marked(state.resolve()) == []

    after = zkcdc("stack", "status", "--state-dir", str(state))
    assert after.returncode == 1
    assert after.stderr.strip() == f"zkcdc: error: stack in {state.resolve()} is not running"


def test_up_refuses_a_taken_port_and_starts_nothing(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = zkcdc(
            "stack",
            "up",
            "--state-dir",
            str(tmp_path),
            "--kafka-port",
            str(port),
            "--zookeeper-port",
            str(free_port_block(1)),
        )
    assert result.returncode == 1
    assert result.stderr.startswith(f"zkcdc: error: port {port} (kafka-1) is already in use")
    assert "Traceback" not in result.stderr
    assert find_marked(tmp_path.resolve()) == []


def test_a_broker_that_does_not_come_up_is_reported_with_its_log_and_all_is_stopped(tmp_path: Path):
    result = zkcdc(
        "stack",
        "up",
        "--state-dir",
        str(tmp_path),
        "--brokers",
        "1",
        "--zookeeper-port",
        str(free_port_block(1)),
        "--kafka-port",
        str(free_port_block(1)),
        "--broker-config",
        "num.io.threads=not-a-number",
    )
    assert result.returncode == 1
    first, *log_tail = result.stderr.splitlines()
    assert first.startswith("zkcdc: error: kafka-1 did not come up (process exited)")
    assert any("num.io.threads" in line for line in log_tail)
    assert "Traceback" not in result.stderr
    assert find_marked(tmp_path.resolve()) == []


def test_missing_java_is_one_line_and_non_zero(tmp_path: Path):
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))
    result = zkcdc("stack", "up", "--state-dir", str(tmp_path), env=env)
    assert result.returncode == 1
    assert result.stderr == "zkcdc: error: java not found on PATH: install a Java 17 runtime\n"
