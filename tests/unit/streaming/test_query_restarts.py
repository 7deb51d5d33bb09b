"""A query that Spark ended only because a Python worker did not connect back in its 10 s
starts again from its checkpoint, a few times; one that Kafka out of reach ended starts again
for as long as the outage lasts; any other failure ends the job at once, in one line. (The
real cases, on real Spark: tests/integration/test_old_event_log_replay.py, and the brokers
stopped for longer than Kafka's client waits in tests/integration/test_alert_job.py.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_runner import WORKER_START_RESTARTS, keep_running
from zkcdc.streaming.job.lean_batches import BatchCall
from zkcdc.streaming.job.query_failures import KafkaOutage
from zkcdc.streaming.sinks.kafka_topic import KafkaOutOfReach

SLOW_WORKER = "Python worker failed to connect back.\n\tat org.apache.spark.api.python.X"
KAFKA_DOWN = "Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout expired"


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


def run(
    writer: Writer,
    error: Exception | None = None,
    stopped: bool = False,
    outage: KafkaOutage | None = None,
    stop: threading.Event | None = None,
) -> list[tuple[Any, BatchCall]]:
    call = BatchCall(None, (), lambda batch, batch_id: None)  # type: ignore[arg-type]
    call.error = error
    queries: list[tuple[Any, BatchCall]] = [(EndedQuery(writer.failures[0]), call)]
    stop = stop or threading.Event()
    if stopped:
        stop.set()
    outage = outage or KafkaOutage(jitter=lambda: 0)  # no wait between starts
    keep_running(writer, queries, not stopped, stop, outage)
    return queries


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


def test_a_query_kafka_out_of_reach_ended_starts_again_for_as_long_as_the_outage_lasts() -> None:
    outage = KafkaOutage(jitter=lambda: 0)
    writer = Writer([KAFKA_DOWN] * (WORKER_START_RESTARTS + 5) + [None])
    run(writer, outage=outage)
    assert writer.started == WORKER_START_RESTARTS + 5
    assert outage.failures == WORKER_START_RESTARTS + 5


def test_a_delivery_kafka_did_not_take_in_time_starts_the_query_again() -> None:
    writer = Writer(["An exception was raised by the Python Proxy", None])
    run(writer, KafkaOutOfReach("records not delivered to zkcdc.alerts within 60 s"))
    assert writer.started == 1


def test_a_job_stopped_while_it_waits_out_an_outage_ends_without_an_error() -> None:
    stop = threading.Event()

    class StoppedMeanwhile(KafkaOutage):
        def failed(self) -> float:
            stop.set()  # a SIGTERM while the job waits
            return 30.0

    writer = Writer([KAFKA_DOWN, None])
    queries = run(writer, outage=StoppedMeanwhile(), stop=stop)
    assert writer.started == 0
    assert queries == []  # no query left to stop, no failure to say


def test_pyspark_s_traceback_of_a_delivery_kafka_failed_is_left_to_the_jobs_own_warning() -> None:
    import logging
    import sys

    def record_of(error: Exception) -> logging.LogRecord:
        try:
            raise error
        except Exception:
            info = sys.exc_info()
        return logging.LogRecord("py4j.clientserver", logging.ERROR, "", 0, "proxy", (), info)

    call = BatchCall(None, (), lambda batch, batch_id: None)  # type: ignore[arg-type]
    try:
        py4j = logging.getLogger("py4j.clientserver")
        call.error = KafkaOutOfReach("records not delivered to zkcdc.alerts within 60 s")
        assert not py4j.filter(record_of(call.error))
        call.error = StreamingError("the alerts file cannot be written")
        assert py4j.filter(record_of(call.error))  # any other failure keeps its traceback
    finally:
        call.close()
