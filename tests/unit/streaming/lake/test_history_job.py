"""The live history job rides out a Kafka outage: a query that Kafka out of reach failed starts
again from its checkpoint after the outage's wait, for as long as the outage lasts; any other
failure ends the job in one line; a stop during the wait ends it with nothing more to say.
(On real Spark and brokers: the brokers stopped for longer than Kafka's client waits in
tests/integration/test_alert_job.py.)"""

from __future__ import annotations

import threading

import pytest

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.lean_batches import BatchCall
from zkcdc.streaming.job.query_failures import KafkaOutage
from zkcdc.streaming.lake.history_job import _Query, _rides_out

KAFKA_DOWN = (
    "An exception was raised by the Python Proxy. Return Message: Traceback ...\n"
    "py4j.protocol.Py4JJavaError: An error occurred while calling o88.save.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: ... "
    "org.apache.kafka.common.errors.TimeoutException: Timeout of 5000ms expired before the "
    "position for partition changes-0 could be determined"
)
DELTA_REFUSED = "[DELTA_SCHEMA_CHANGED] The schema of the table has changed"


class Query:
    """A streaming query as the history job sees one."""

    def __init__(self, failure: str | None) -> None:
        self.failure = failure
        self.name = "zkcdc-history-changes"

    def exception(self) -> str | None:
        return self.failure


class Writer:
    def __init__(self) -> None:
        self.started = 0

    def start(self) -> Query:
        self.started += 1
        return Query(None)


class WriterRaised(Exception):
    """What the table writer raised in a micro-batch (py4j's error: Java's text)."""


def query(writer: Writer, failure: str | None, raised: Exception | None = None) -> _Query:
    call = BatchCall(None, (), lambda batch, n: None)  # type: ignore[arg-type]
    call.error = raised
    return _Query(writer, call, Query(failure))


def no_wait() -> KafkaOutage:
    return KafkaOutage(jitter=lambda: 0)


def test_queries_kafka_failed_start_again_from_their_writers() -> None:
    changes, alerts = Writer(), Writer()
    failed = [query(changes, KAFKA_DOWN), query(alerts, KAFKA_DOWN)]
    outage = no_wait()
    assert _rides_out(failed, outage, threading.Event())
    assert (changes.started, alerts.started) == (1, 1)
    assert all(q.query.exception() is None for q in failed)
    assert outage.failures == 1
    # Once more in the same outage: counted as its second failure.
    failed[0].query = Query(KAFKA_DOWN)  # the restarted query failed too
    assert _rides_out(failed[:1], outage, threading.Event())
    assert outage.failures == 2 and changes.started == 2


def test_the_warning_names_the_innermost_java_reason(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="zkcdc.history")
    _rides_out([query(Writer(), KAFKA_DOWN)], no_wait(), threading.Event())
    (record,) = caplog.records
    assert record.getMessage().startswith("Kafka out of reach: the history job's queries start")
    fields = record.zkcdc_fields  # type: ignore[attr-defined]
    assert fields["query"] == "zkcdc-history-changes"
    assert fields["reason"] == (
        "TimeoutException: Timeout of 5000ms expired before the position for partition "
        "changes-0 could be determined"
    )


def test_any_other_failure_ends_the_job_in_one_line() -> None:
    writer = Writer()
    failed = [query(Writer(), KAFKA_DOWN), query(writer, DELTA_REFUSED)]
    with pytest.raises(StreamingError) as raised:
        _rides_out(failed, no_wait(), threading.Event())
    assert str(raised.value) == f"the history job failed: {DELTA_REFUSED}"
    assert writer.started == 0


def test_the_table_writers_own_error_is_the_reason_not_the_python_proxys() -> None:
    """Spark's message of a foreachBatch that raised says only that the Python Proxy did; the
    writer's error (py4j's, Java's text after py4j's call) says why."""
    said = "An exception was raised by the Python Proxy. Return Message: Traceback ..."
    raised = WriterRaised(
        "An error occurred while calling o88.save.\n: java.io.IOException: No space left on "
        "device\n\tat org.apache.hadoop.X"
    )
    with pytest.raises(StreamingError) as failed:
        _rides_out([query(Writer(), said, raised)], no_wait(), threading.Event())
    assert str(failed.value) == "the history job failed: IOException: No space left on device"
    # Kafka out of reach in the writer's own error: ridden out, the error cleared for the next.
    down = query(Writer(), said, WriterRaised(KAFKA_DOWN))
    assert _rides_out([down], no_wait(), threading.Event())
    assert down.call.error is None


def test_a_failure_after_a_stop_is_said_not_waited_out() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(StreamingError, match="the history job failed"):
        _rides_out([query(Writer(), KAFKA_DOWN)], no_wait(), stop)


def test_a_stop_during_the_wait_starts_nothing() -> None:
    stop = threading.Event()
    writer = Writer()
    # The wait is long; the stop comes from another thread, as a signal's handler sets it.
    outage = KafkaOutage(first_s=60, jitter=lambda: 1)
    threading.Timer(0.05, stop.set).start()
    assert not _rides_out([query(writer, KAFKA_DOWN)], outage, stop)
    assert writer.started == 0
