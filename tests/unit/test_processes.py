"""Processes are identified by pid and start time and stopped exactly, SIGKILL as the last resort."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from zkcdc.stack.processes import ProcessRecord, find_marked, is_running, spawn, terminate


def test_a_spawned_process_is_running_until_terminated(tmp_path: Path):
    record = spawn("sleeper", ["sleep", "60"], tmp_path / "sleeper.log")
    assert is_running(record)
    assert terminate([record], timeout_s=5) == []
    assert not is_running(record)


def test_a_reused_pid_is_not_mistaken_for_the_recorded_process(tmp_path: Path):
    record = spawn("sleeper", ["sleep", "60"], tmp_path / "sleeper.log")
    impostor = ProcessRecord("sleeper", record.pid, record.created + 60)
    assert not is_running(impostor)
    assert terminate([impostor], timeout_s=1) == []
    assert is_running(record)
    terminate([record], timeout_s=5)


def test_a_process_is_still_known_after_the_wall_clock_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The kernel moves /proc/stat's boot time when the clock is slewed or stepped, and psutil
    adds it to every start time: a running broker must not read as exited."""
    record = spawn("sleeper", ["sleep", "60"], tmp_path / "sleeper.log")
    try:
        booted = psutil.boot_time()
        monkeypatch.setattr(psutil._pslinux, "boot_time", lambda: booted + 1.0)
        assert psutil.Process(record.pid).create_time() != record.created
        assert is_running(record)
    finally:
        monkeypatch.undo()
        terminate([record], timeout_s=5)


def test_a_process_ignoring_sigterm_is_killed_after_the_timeout(tmp_path: Path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    log = tmp_path / "stubborn.log"
    record = spawn("stubborn", [sys.executable, "-c", code], log)
    while "ready" not in log.read_text():
        time.sleep(0.01)
    assert terminate([record], timeout_s=0.5, sig=signal.SIGTERM) == [record]
    assert not is_running(record)


def test_find_marked_finds_processes_of_exactly_one_state_dir(tmp_path: Path):
    def marked(state: str) -> ProcessRecord:
        argv = [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            f"-Dzkcdc.stack={tmp_path / state}",
        ]
        return spawn(state, argv, tmp_path / f"{state}.log")

    a, b = marked("a"), marked("b")
    try:
        assert find_marked(tmp_path / "a") == [a.pid]
        assert find_marked(tmp_path / "b") == [b.pid]
        assert find_marked(tmp_path / "c") == []
    finally:
        terminate([a, b], timeout_s=5)
