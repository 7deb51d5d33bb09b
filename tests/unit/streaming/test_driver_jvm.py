"""What a job says when its Spark driver's JVM ends under it (streaming/job/driver_jvm.py):
one line by how it ended, and only once it has ended."""

from __future__ import annotations

import logging
import subprocess
import sys
from types import SimpleNamespace

import pytest
from py4j.protocol import Py4JError, Py4JJavaError

from zkcdc.streaming.job.driver_jvm import (
    OUT_OF_MEMORY_STATUS,
    DriverEnded,
    WhileTheDriverRuns,
    driver_in_a_session_of_its_own,
    ended_message,
    ending_with_the_driver,
    exit_status,
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


def test_the_driver_pyspark_launches_in_the_block_gets_a_session_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal to the job's process group then misses the driver (the real case, SIGTERM to
    a job's group mid-backlog: tests/integration/test_alert_job_stop.py)."""
    from pyspark import java_gateway

    launched: list[dict[str, object]] = []

    def launcher(command: list[str], **kwargs: object) -> str:
        launched.append(kwargs)
        return "process"

    monkeypatch.setattr(java_gateway, "Popen", launcher)
    with driver_in_a_session_of_its_own():
        assert java_gateway.Popen(["spark-submit"], stdin=-1) == "process"
    assert launched == [{"stdin": -1, "start_new_session": True}]
    assert java_gateway.Popen is launcher  # PySpark's own again after the block
