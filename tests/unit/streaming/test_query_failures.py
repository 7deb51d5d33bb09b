"""Why a streaming query failed: Kafka out of reach (the query starts again, after a wait that
grows while the outage lasts) or anything else, and the one line that says it."""

from __future__ import annotations

import pytest

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.query_failures import (
    KafkaOutage,
    failure_line,
    kafka_out_of_reach,
    kafka_reason,
)
from zkcdc.streaming.sinks.kafka_topic import KafkaOutOfReach

# What py4j raises in the delivery when the micro-batch's Spark job failed: its message is
# Java's, as Spark 4.2 said it with every broker down for a minute.
COLLECT_FAILED = (
    "An error occurred while calling o7199.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1862.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 1862.0 (TID 3721) (192.0.2.2 "
    "executor driver): org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms "
    "expired before the position for partition zkcdc.changes.b6-4 could be determined\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:3)"
)
# The source on the driver, asking Kafka for the newest offsets: the query's own exception.
OFFSETS_FAILED = (
    "[STREAM_FAILED] Query [id = a, runId = b] terminated with exception: Timeout expired "
    "while fetching topic metadata\n\tat org.apache.spark.X\nCaused by: "
    "org.apache.kafka.common.errors.TimeoutException: Timeout expired while fetching topic "
    "metadata"
)

# A broker back from an outage that has not loaded its partitions yet: the first line of a
# history job's query's exception, seconds after every broker of the local stack restarted.
NOT_LOADED_YET = (
    "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not "
    "host this topic-partition.\n\tat org.apache.spark.sql.kafka010.X"
)


class JavaCallFailed(Exception):
    """py4j's Py4JJavaError as the job sees it: its text is Java's."""

    def __str__(self) -> str:
        return COLLECT_FAILED


# A task's poll that got no record within the source's poll timeout (the brokers back, a
# partition's leader not yet), as Spark 4.2's Kafka source said it.
POLL_EMPTY = (
    "Job aborted due to stage failure: Task 0 in stage 18.0 failed 1 times, most recent "
    "failure: Lost task 0.0 in stage 18.0 (TID 32) (192.0.2.2 executor driver): "
    "java.util.concurrent.TimeoutException: Cannot fetch record for offset 57 in 5000 "
    "milliseconds\n\tat org.apache.spark.sql.kafka010.consumer.KafkaDataConsumer.x"
)


def test_kafka_out_of_reach_is_told_from_the_source_the_delivery_and_its_sinks() -> None:
    assert kafka_out_of_reach("An exception was raised by the Python Proxy", JavaCallFailed())
    assert kafka_out_of_reach(OFFSETS_FAILED, None)
    assert kafka_out_of_reach(POLL_EMPTY, None)
    assert kafka_out_of_reach(NOT_LOADED_YET, None)
    assert not kafka_out_of_reach("java.util.concurrent.TimeoutException: Futures timed out", None)
    undelivered = KafkaOutOfReach("records not delivered to zkcdc.alerts within 60 s")
    assert kafka_out_of_reach("An exception was raised by the Python Proxy", undelivered)


@pytest.mark.parametrize(
    ("spark", "delivery"),
    [
        ("[STATE_STORE_CORRUPTED] a reason", None),
        ("Python worker failed to connect back.\n\tat org.apache.spark.api.python.X", None),
        # The delivery's own failure decides, whatever Spark's message says.
        (OFFSETS_FAILED, StreamingError("the alerts file cannot be written")),
        ("org.apache.kafka.common.errors.TopicAuthorizationException: not authorized", None),
    ],
)
def test_any_other_failure_is_not_kafka_out_of_reach(
    spark: str, delivery: Exception | None
) -> None:
    assert not kafka_out_of_reach(spark, delivery)


def test_a_failed_spark_job_of_the_delivery_is_named_by_its_innermost_java_exception() -> None:
    assert failure_line("q1", "An exception was raised by the Python Proxy", JavaCallFailed()) == (
        "streaming query q1 failed: TimeoutException: Timeout of 60000ms expired before the "
        "position for partition zkcdc.changes.b6-4 could be determined"
    )
    bare = (
        "An error occurred while calling o7.collectToPython.\n: java.lang.IllegalStateException: x"
    )
    assert failure_line("q1", bare, None) == "streaming query q1 failed: IllegalStateException: x"
    assert failure_line("q1", "An error occurred while calling o7.x", None) == (
        "streaming query q1 failed: An error occurred while calling o7.x"
    )


def test_kafkas_reason_is_its_client_error_on_one_line_wherever_spark_holds_it() -> None:
    """The history job's foreachBatch fails in Python: Spark's message is then a traceback
    holding py4j's text, Kafka's error deep inside it."""
    assert kafka_reason(OFFSETS_FAILED) == (
        "TimeoutException: Timeout expired while fetching topic metadata"
    )
    in_traceback = f"An exception was raised by the Python Proxy. Traceback:\n{COLLECT_FAILED}"
    assert kafka_reason(in_traceback) == (
        "TimeoutException: Timeout of 60000ms expired before the position for partition "
        "zkcdc.changes.b6-4 could be determined"
    )
    assert kafka_reason(POLL_EMPTY) == (
        "TimeoutException: Cannot fetch record for offset 57 in 5000 milliseconds"
    )
    assert kafka_reason("[STATE_STORE_CORRUPTED] a reason") is None


def test_the_wait_doubles_within_an_outage_up_to_its_cap_and_starts_again_after_a_quiet_while():
    now = [0.0]
    outage = KafkaOutage(first_s=1, most_s=8, quiet_s=300, clock=lambda: now[0], jitter=lambda: 1)
    waits = []
    for _ in range(6):
        waits.append(outage.failed())
        now[0] += 70  # a failure a little over Kafka's client timeout apart
    assert waits == [1, 2, 4, 8, 8, 8]
    assert outage.failures == 6
    now[0] += 300  # the query ran for five minutes: the next failure is a new outage
    assert outage.failed() == 1
    assert outage.failures == 1


def test_the_wait_is_drawn_below_its_cap() -> None:
    outage = KafkaOutage(first_s=1, most_s=30, jitter=lambda: 0.5)
    assert [outage.failed() for _ in range(3)] == [0.5, 1.0, 2.0]
