"""What a job says when its Spark driver's JVM ends under it (streaming/job/driver_jvm.py):
one line by how it ended, and only once it has ended."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from py4j.protocol import Py4JError, Py4JJavaError

from zkcdc.ground import logs, waiting
from zkcdc.streaming.job.driver_jvm import (
    OUT_OF_MEMORY_STATUS,
    DriverEnded,
    WhileTheDriverRuns,
    ended_message,
    ending_with_the_driver,
    exit_status,
    launching_the_driver,
    read_into_log,
)


def _failing(record: logging.LogRecord, failure: Exception) -> logging.LogRecord:
    record = logging.makeLogRecord(record.__dict__)
    record.exc_info = (type(failure), failure, None)
    return record


def _child() -> subprocess.Popen[bytes]:
    """A stand-in driver: a process that runs until its stdin closes or it is killed."""
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )


def _spark_with(process: object) -> object:
    return SimpleNamespace(sparkContext=SimpleNamespace(_gateway=SimpleNamespace(proc=process)))


def test_each_way_a_driver_ends_is_one_line_that_says_how_to_go_on():
    heap = ended_message(OUT_OF_MEMORY_STATUS, "512m", "the alert job")
    assert heap == (
        "the Spark driver ran out of its heap (--driver-memory 512m) and exited under the alert "
        "job; start the alert job again: it resumes from its checkpoint, with a larger "
        "--driver-memory"
    )
    assert "SIGKILL, as the kernel does" in ended_message(-9, "1g", "the history job")
    assert "(SIGSEGV)" in ended_message(-11, "1g", "the history job")
    assert "(signal 99)" in ended_message(-99, "1g", "the history job")
    assert "exited with status 134" in ended_message(134, "1g", "the history job")
    for status in (OUT_OF_MEMORY_STATUS, -9, -11, 1):
        assert "\n" not in ended_message(status, "1g", "the alert job")


def test_a_failure_becomes_the_drivers_end_only_once_the_driver_has_ended():
    alive = _child()
    try:
        spark = _spark_with(alive)
        assert exit_status(spark) is None
        with pytest.raises(ValueError), ending_with_the_driver(spark, "1g", "the job"):
            raise ValueError("a failure of its own")
        alive.kill()
        alive.wait()
        assert exit_status(spark) == -9
        with pytest.raises(DriverEnded) as ended, ending_with_the_driver(spark, "1g", "the job"):
            raise ConnectionError("Answer from Java side is empty")
        assert str(ended.value).startswith("the Spark driver's JVM was killed (SIGKILL")
        assert isinstance(ended.value.__cause__, ConnectionError)
    finally:
        alive.kill()
        alive.wait()


def test_py4js_reports_of_failed_callbacks_are_kept_only_while_the_driver_runs():
    callback = logging.LogRecord("py4j.clientserver", logging.ERROR, __file__, 1,
                                 "There was an exception while executing the Python Proxy", None,
                                 None)  # fmt: skip
    driver = _child()
    try:
        kept = WhileTheDriverRuns(_spark_with(driver))
        assert kept.filter(callback)
        java = Py4JJavaError("An error occurred while calling o1.collectToPython",
                             SimpleNamespace(_target_id="o2"))  # fmt: skip
        unanswered = Py4JError("An error occurred while calling o1.collectToPython")
        assert kept.filter(_failing(callback, java))
        # The driver not answering: its end, whether or not its process is gone yet.
        assert not kept.filter(_failing(callback, unanswered))
    finally:
        driver.kill()
        driver.wait()
    assert not kept.filter(callback)


def test_a_connection_refused_waits_for_a_driver_whose_connections_closed_before_its_end():
    """A killed JVM's sockets close before its process has ended: the refusal that follows is
    still its end, said as such once the process is gone."""
    ending = _child()
    try:
        spark = _spark_with(ending)
        assert exit_status(spark) is None
        with pytest.raises(DriverEnded) as ended, ending_with_the_driver(spark, "1g", "the job"):
            assert ending.stdin is not None
            ending.stdin.close()  # it ends now, but has not ended yet when the refusal comes
            raise ConnectionRefusedError(111, "Connection refused")
        assert "exited with status 0 under the job" in str(ended.value)
    finally:
        ending.kill()
        ending.wait()


def test_a_driver_this_process_did_not_start_is_not_watched():
    """spark-submit's driver started this process: its end is this process's."""
    assert exit_status(_spark_with(None)) is None
    assert exit_status(SimpleNamespace()) is None


def test_the_driver_pyspark_launches_in_the_block_gets_a_session_of_its_own_and_its_output_read(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A signal to the job's process group then misses the driver (the real case, SIGTERM to
    a job's group mid-backlog: tests/integration/test_alert_job_stop.py), and what the JVM
    writes on either stream comes out as the command's log events."""
    from pyspark import java_gateway

    launched: list[dict[str, object]] = []

    def launcher(command: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        launched.append(kwargs)
        script = "import sys; print('26/12/05 10:00:00 WARN Utils: on stdout'); " \
                 "print('WARNING: on stderr', file=sys.stderr)"  # fmt: skip
        return subprocess.Popen([sys.executable, "-c", script], **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(java_gateway, "Popen", launcher)
    caplog.set_level(logging.DEBUG, logger=logs.SPARK_LOGGER)
    with launching_the_driver():
        process = java_gateway.Popen(["spark-submit"], stdin=subprocess.PIPE)
    assert java_gateway.Popen is launcher  # PySpark's own again after the block
    assert launched[0]["start_new_session"] is True
    assert launched[0]["stdout"] == launched[0]["stderr"] == subprocess.PIPE
    process.stdin.close()
    process.wait(10)

    def logged() -> set[tuple[str, str]]:
        return {
            (r.levelname, r.getMessage()) for r in caplog.records if r.name == logs.SPARK_LOGGER
        }

    waiting.wait_until(lambda: len(logged()) == 2, 10, interval_s=0.02, what="the JVM's two lines")
    assert logged() == {("WARNING", "on stdout"), ("WARNING", "on stderr")}


def test_a_pipe_is_read_to_its_end_whatever_it_holds(caplog: pytest.LogCaptureFixture) -> None:
    """Lines split across writes, ended by a carriage return, not ended at all, or not UTF-8;
    a stack with the line it belongs to; a stage bar gone."""
    caplog.set_level(logging.DEBUG, logger=logs.SPARK_LOGGER)
    read, write = os.pipe()
    with os.fdopen(read, "rb", buffering=0) as stream:
        thread = read_into_log(stream)
        for chunk in (b"26/12/05 10:00:00 ERROR RocksDB: load failed\njava.io.IOException: gone\n",
                      b"\tat a.B.c(B.java:1)\n\r[Stage 1:>  (0 + 2) / 2]\r",
                      b"26/12/05 10:00:01 WARN Ut", b"ils: half\xff\nlast, no end"):  # fmt: skip
            os.write(write, chunk)
        os.close(write)
        thread.join(10)
    assert not thread.is_alive()
    got = [(r.levelname, r.getMessage(), getattr(r, "zkcdc_fields", {}))
           for r in caplog.records if r.name == logs.SPARK_LOGGER]  # fmt: skip
    assert got == [
        ("ERROR", "load failed",
         {"source": "RocksDB", "exception": "java.io.IOException: gone\n\tat a.B.c(B.java:1)"}),
        ("WARNING", "half\ufffd", {"source": "Utils"}),
        ("INFO", "last, no end", {"source": "jvm"}),
    ]  # fmt: skip


def test_a_pipe_closed_under_the_reader_ends_it_without_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failures: list[object] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    read, write = os.pipe()
    stream = os.fdopen(read, "rb", buffering=0)
    thread = read_into_log(stream)
    stream.close()
    thread.join(10)
    os.close(write)
    assert not thread.is_alive() and failures == []


def test_a_pipe_on_a_descriptor_past_1023_is_read_too(caplog: pytest.LogCaptureFixture) -> None:
    """A long-lived job holds many descriptors: a reader that gave up on a high one would leave
    the JVM's writes waiting on a full pipe."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if soft <= high:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    caplog.set_level(logging.DEBUG, logger=logs.SPARK_LOGGER)
    read, write = os.pipe()
    os.dup2(read, high)
    os.close(read)
    try:
        with os.fdopen(high, "rb", buffering=0) as stream:
            thread = read_into_log(stream)
            os.write(write, b"26/12/05 10:00:00 WARN X: high\n")
            os.close(write)
            thread.join(10)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [r.getMessage() for r in caplog.records if r.name == logs.SPARK_LOGGER] == ["high"]


def test_a_reader_that_fails_still_reads_the_pipe_to_its_end() -> None:
    """Whatever fails in making events, the JVM's writes never wait on a full pipe."""

    class Failing(logs.EventLog):
        def at(self, level: int, event: str, /, **fields: object) -> None:
            raise RuntimeError("a handler that fails")

    read, write = os.pipe()
    with os.fdopen(read, "rb", buffering=0) as stream:
        thread = read_into_log(stream, Failing("x"))
        # Four times what a pipe holds: a writer not read from would wait here for ever.
        payload = b"26/12/05 10:00:00 WARN X: line\n" * (4 * 65536 // 32)
        writer = threading.Thread(target=os.write, args=(write, payload))
        writer.start()
        writer.join(20)
        written = not writer.is_alive()
        os.close(write)
        thread.join(10)
    assert written and not thread.is_alive()


# A stand-in for the driver JVM: it ends once told to (its stdin closed) and released.
_DRIVER = """
import sys
sys.stdin.read()
open(sys.argv[1], "w").close()  # told to end
open(sys.argv[2]).read()  # released (a FIFO)
open(sys.argv[3], "w").close()  # ended
"""
_COMMAND = """
import subprocess, sys
from pyspark import java_gateway
from zkcdc.streaming.job.driver_jvm import launching_the_driver
java_gateway.Popen = lambda command, **kwargs: subprocess.Popen(
    [sys.executable, "-c", sys.argv[1], *sys.argv[2:]], **kwargs)
with launching_the_driver():
    java_gateway.Popen(["spark-submit"], stdin=subprocess.PIPE)
"""


def test_a_command_ends_after_its_driver_jvm(tmp_path: Path) -> None:
    """A recording run's JVM writes the class archive as it exits, and its recorder looks for
    the archive once the command has ended: the command's exit waits for its JVM."""
    told, release, ended = tmp_path / "told", tmp_path / "release", tmp_path / "ended"
    os.mkfifo(release)
    command = subprocess.Popen(
        [sys.executable, "-c", _COMMAND, _DRIVER, str(told), str(release), str(ended)]
    )
    try:
        waiting.wait_until(told.exists, 30, interval_s=0.02, what="the driver told to end")
        assert command.poll() is None  # exiting, it waits for its driver
        release.write_text("go")
        assert command.wait(30) == 0
        assert ended.exists()
    finally:
        command.kill()
        with contextlib.suppress(OSError):  # a stand-in still waiting: released, so it ends
            os.close(os.open(release, os.O_WRONLY | os.O_NONBLOCK))
