"""The Spark driver's JVM as a job's Python sees it: a child process that can end under the job.

A driver out of heap used to keep its process: the thread that ran out died, the py4j thread
serving the job's calls among them, and the job waited for an answer forever, alive to its
supervisor and raising nothing (a fresh job on a 1,000,000-partition cluster at the default
heap). The driver now exits on its first OutOfMemoryError (`EXIT_ON_OUT_OF_MEMORY`), and a job
whose driver has ended (that way, killed, crashed) stops with one line that says how and what
to do, instead of a py4j traceback from each of its threads. Its checkpoint holds what it
committed: started again, it resumes there, nothing lost or doubled."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import select
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import IO, Any

from zkcdc.ground import logs
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.jvm_log_lines import JvmEvent, JvmLines

EXIT_ON_OUT_OF_MEMORY = "-XX:+ExitOnOutOfMemoryError"
OUT_OF_MEMORY_STATUS = 3  # HotSpot's exit status under ExitOnOutOfMemoryError


class DriverEnded(StreamingError):
    """The Spark driver's JVM ended under a job."""


# How long a failure that is the driver not answering waits for its process to end: a killed
# JVM's connections close before its process has ended (a large heap takes a while to let go).
ENDING_WAIT_S = 10.0


@contextlib.contextmanager
def launching_the_driver() -> Iterator[None]:
    """The driver JVM that PySpark launches in the block:
    - starts a session of its own (and the Python workers it forks with it). A signal to the
      job's process group (a terminal's hang-up, `timeout`, a supervisor that stops a group)
      then reaches the job alone, which stops Spark as it should: the micro-batch under way
      finished, the JVM stopped by the job. Sent to the JVM too, SIGTERM ended the driver
      under the job, which exited 1 ("the Spark driver's JVM exited with status 143");
    - writes its output (stdout and stderr) into pipes that `read_into_log` turns into the
      command's own JSON log lines (jvm_log_lines.py);
    - is waited for when the command exits (`end_with_the_driver`).
    PySpark sets its own `preexec_fn` and takes no Popen arguments through the session
    builder, so its launcher's Popen is wrapped here; a JVM left without its job still ends,
    when the pipe to its stdin closes."""
    from pyspark import java_gateway

    launch = java_gateway.Popen  # type: ignore[attr-defined]

    def popen(*args: Any, **kwargs: Any) -> Any:
        piped = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        process = launch(*args, **{**kwargs, **piped, "start_new_session": True})
        # A stand-in launcher (a test's) may pipe nothing.
        streams = [stream for stream in (process.stdout, process.stderr) if stream is not None]
        atexit.register(end_with_the_driver, process, [read_into_log(s) for s in streams])
        return process

    java_gateway.Popen = popen  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        java_gateway.Popen = launch  # type: ignore[attr-defined]


# An event of the JVM's is written once its pipe has been this quiet: a stack that goes with
# it comes in the same write or right after.
QUIET_S = 0.2
# How long a command's exit waits for its driver JVM, told to end by its stdin closing. Its
# end is part of the command's: Spark's shutdown hooks, and the class archive a recording run
# writes as its JVM exits (class_archive.py), whose recorder looks for it once the command
# has ended. When the JVM wrote on the command's own stderr, whoever read that waited for it.
DRIVER_EXIT_WAIT_S = 120.0
# A "line" this long without an end is taken as it is (the JVM writes none such).
LONGEST_LINE = 1 << 20


def end_with_the_driver(process: Any, readers: list[threading.Thread]) -> None:
    """At the command's exit: the driver JVM told to end (its stdin closed, as PySpark's
    gateway server watches it) and waited for, then its last lines read into the log."""
    with contextlib.suppress(OSError, ValueError):
        if process.stdin is not None:
            process.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(DRIVER_EXIT_WAIT_S)
    for reader in readers:
        reader.join(10 * QUIET_S)


def read_into_log(stream: IO[bytes], log: logs.EventLog | None = None) -> threading.Thread:
    """A thread that reads `stream` (a pipe of the JVM's) until it closes, each line as an
    event of `log` (`logs.SPARK_LOGGER`'s by default): it never leaves the JVM's writes
    waiting long on a full pipe."""
    thread = threading.Thread(
        target=_pump,
        args=(stream, log or logs.get(logs.SPARK_LOGGER)),
        name="jvm-output",
        daemon=True,
    )
    thread.start()
    return thread


def _pump(stream: IO[bytes], log: logs.EventLog) -> None:
    fd = stream.fileno()
    try:
        _read_lines(fd, log)
    except Exception:
        # Still read to the end, whatever failed: the JVM's writes must never wait on a pipe.
        logs.get(logs.SPARK_LOGGER).exception("the Spark driver's output is not read any more")
        with contextlib.suppress(OSError):
            while os.read(fd, 1 << 16):
                pass


def _read_lines(fd: int, log: logs.EventLog) -> None:
    lines, rest = JvmLines(), b""
    # poll, not select: select refuses a descriptor numbered 1024 or more, and a reader that
    # stopped would leave the JVM's writes waiting on a full pipe.
    readable = select.poll()
    readable.register(fd, select.POLLIN)

    def emit(events: list[JvmEvent]) -> None:
        for event in events:
            log.at(event.level, event.event, **event.fields)

    while True:
        try:
            if not readable.poll(QUIET_S * 1000):
                emit(lines.flush())
                continue
            chunk = os.read(fd, 1 << 16)
        except (OSError, ValueError):  # the pipe closed under the reader: its end as well
            chunk = b""
        if not chunk:
            break
        # Split at newlines only: `JvmLines.feed` splits a line at its carriage returns.
        *complete, rest = (rest + chunk).split(b"\n")
        if len(rest) > LONGEST_LINE:
            complete, rest = [*complete, rest], b""
        for raw in complete:
            emit(lines.feed(raw.decode("utf-8", "replace")))
    emit(lines.feed(rest.decode("utf-8", "replace")) + lines.flush())


def exit_status(spark: Any, wait_s: float = 0.0) -> int | None:
    """The driver JVM's exit status once it has ended (negative: the signal that ended it),
    waiting up to `wait_s` for it; None while it runs, or where this process did not start it
    (spark-submit started this one: its end is this process's)."""
    gateway = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    process = getattr(gateway, "proc", None)
    if process is None:
        return None
    try:
        status = process.wait(wait_s) if wait_s > 0 else process.poll()
    except subprocess.TimeoutExpired:
        return None
    return None if status is None else int(status)


def unanswered(failure: BaseException | None) -> bool:
    """Whether `failure`, or what it was raised from, is the driver not answering: a refused
    or dropped connection, or a py4j error that carries no Java exception."""
    from py4j.protocol import Py4JError, Py4JJavaError

    seen = 0
    while failure is not None and seen < 20:
        if isinstance(failure, ConnectionError) or (
            isinstance(failure, Py4JError) and not isinstance(failure, Py4JJavaError)
        ):
            return True
        failure, seen = failure.__cause__ or failure.__context__, seen + 1
    return False


def ended_message(status: int, driver_memory: str, job: str) -> str:
    """What a job says in one line when its driver ended with `status`."""
    again = f"start {job} again: it resumes from its checkpoint"
    if status == OUT_OF_MEMORY_STATUS:
        return (
            f"the Spark driver ran out of its heap (--driver-memory {driver_memory}) and exited "
            f"under {job}; {again}, with a larger --driver-memory"
        )
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        how = f"was killed ({name}"
        # The kernel's OOM killer sends SIGKILL: a machine short of memory looks like this too.
        how += ", as the kernel does when the machine runs out of memory)" if -status == 9 else ")"
        return f"the Spark driver's JVM {how} under {job}; {again}"
    return f"the Spark driver's JVM exited with status {status} under {job}; {again}"


@contextlib.contextmanager
def ending_with_the_driver(spark: Any, driver_memory: str, job: str) -> Iterator[None]:
    """Whatever fails in the block once the driver has ended is that end, said in one line."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, DriverEnded):
            raise
        status = exit_status(spark, ENDING_WAIT_S if unanswered(exc) else 0.0)
        if status is None:
            raise
        raise DriverEnded(ended_message(status, driver_memory, job)) from exc


def driver_running(spark: Any, failure: BaseException | None = None) -> bool:
    """Whether calls into the driver can still be answered (cleanup skips them otherwise: each
    would fail, and py4j would log a traceback for it). `failure`: what is being raised, if
    anything; when it is the driver not answering, its end is waited for."""
    return exit_status(spark, ENDING_WAIT_S if unanswered(failure) else 0.0) is None


class WhileTheDriverRuns(logging.Filter):
    """Keeps py4j's record of a failed callback into this process (a foreachBatch function,
    with its traceback) while the driver runs and answered: a callback that failed because
    the driver stopped answering (a py4j error that carries no Java exception: its process
    may not have exited yet) is the driver's end, which the job says in one line."""

    def __init__(self, spark: Any) -> None:
        super().__init__()
        self._spark = spark

    def filter(self, record: logging.LogRecord) -> bool:
        failure = record.exc_info[1] if record.exc_info else None
        return not unanswered(failure) and driver_running(self._spark)
