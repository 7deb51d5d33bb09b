"""A query that Spark ended only because a Python worker did not connect back in its 10 s
starts again from its checkpoint, a few times; any other failure ends the job at once, in one
line. (The real case, on real Spark, is in tests/integration/test_old_event_log_replay.py.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_runner import WORKER_START_RESTARTS, keep_running
from zkcdc.streaming.job.lean_batches import BatchCall

SLOW_WORKER = "Python worker failed to connect back.\n\tat org.apache.spark.api.python.X"


class EndedQuery:
    """A streaming query as alert_runner sees one: ended, with Spark's exception or none."""

    def __init__(self, failure: str | None) -> None:
        self.failure = failure
        self.name, self.id, self.isActive = "alerts", "q", False
        self._jsq = self  # its Java side, asked for progress: none

    def lastProgress(self) -> None:  # Spark's name
        return None

    def exception(self) -> str | None:
        return self.failure


class Writer:
    """Starts queries that end as `failures` says, one after the other."""

    def __init__(self, failures: list[str | None]) -> None:
        self.failures = failures
        self.started = 0

    def start(self) -> EndedQuery:
        self.started += 1
        return EndedQuery(self.failures[self.started])


def run(writer: Writer, error: Exception | None = None, stopped: bool = False) -> None:
    call = BatchCall(None, (), lambda batch, batch_id: None)  # type: ignore[arg-type]
    call.error = error
    queries: list[tuple[Any, BatchCall]] = [(EndedQuery(writer.failures[0]), call)]
    stop = threading.Event()
    if stopped:
        stop.set()
    keep_running(writer, queries, not stopped, stop)


def test_a_query_a_slow_worker_ended_starts_again_until_it_runs() -> None:
    writer = Writer([SLOW_WORKER, SLOW_WORKER, None])
    run(writer)
    assert writer.started == 2


def test_a_worker_that_keeps_failing_ends_the_job_after_the_last_restart() -> None:
    writer = Writer([SLOW_WORKER] * (WORKER_START_RESTARTS + 2))
    with pytest.raises(StreamingError, match=r"q.* failed: Python worker failed to connect back"):
        run(writer)
    assert writer.started == WORKER_START_RESTARTS


def test_any_other_failure_ends_the_job_without_a_restart() -> None:
    writer = Writer(["[STATE_STORE_CORRUPTED] a reason", None])
    with pytest.raises(StreamingError, match=r"failed: \[STATE_STORE_CORRUPTED\] a reason$"):
        run(writer)
    # The delivery's own error, whatever Spark's message says, is not a slow worker.
    writer = Writer([SLOW_WORKER, None])
    with pytest.raises(StreamingError, match="failed: records not delivered"):
        run(writer, StreamingError("records not delivered"))
    assert writer.started == 0


def test_a_job_being_stopped_does_not_start_its_query_again() -> None:
    writer = Writer([SLOW_WORKER, None])
    with pytest.raises(StreamingError, match="Python worker failed to connect back"):
        run(writer, stopped=True)
    assert writer.started == 0
