"""Why the alert job's streaming query failed, from what Spark and the job's delivery said: one
line for the user, and whether the failure was Kafka out of reach, which a later start of the
query from its checkpoint cures (`KafkaOutage` says when), where anything else ends the job."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import Any

from zkcdc.ground.backoff import Backoff
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.sinks.kafka_topic import KafkaOutOfReach

# Kafka's Java client's errors that say a broker could not be reached or answered in time, as
# Spark's Kafka source raises them (in a task, or on the driver asking for offsets) while the
# brokers are down: the source gives up after the client's `default.api.timeout.ms` (60 s).
_KAFKA_OUT_OF_REACH = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(?:TimeoutException|NetworkException"
    r"|DisconnectException|BrokerNotAvailableException|LeaderNotAvailableException"
    r"|NotLeaderOrFollowerException|NotEnoughReplicasException"
    # A broker just started answers it for the partitions it has not loaded yet (Kafka's
    # client counts it retriable).
    r"|UnknownTopicOrPartitionException)\b"
    # Spark's own, when a task's poll got no record in `kafkaConsumer.pollTimeoutMs` (the
    # brokers back, a partition's leader not yet).
    r"|java\.util\.concurrent\.TimeoutException(?=: Cannot fetch record for offset)"
)

# Spark's errors for a checkpoint it cannot resume: a state store it could not load, files
# missing or of another query (what the check before the start could not see:
# checkpoint_files.py).
_NOT_RESUMABLE = re.compile(
    r"\[(?:CANNOT_LOAD_STATE_STORE|STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY"
    r"|CANNOT_READ_STREAMING_STATE_FILE|STREAMING_CHECKPOINT_MISSING_METADATA_FILE"
    r"|STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
    r"|STDS_FAILED_TO_READ_OPERATOR_METADATA|STDS_FAILED_TO_READ_STATE_SCHEMA"
    r"|STATE_STORE_UNEXPECTED_EMPTY_FILE_IN_ROCKSDB_ZIP"
    r"|STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED)\b"
)
_OWN_ERROR = re.compile(r"^zkcdc\.[\w.]+: (.+)$", re.MULTILINE)
# A Java exception's class and the colon before its message, inside a longer line: Spark's
# "Job aborted due to stage failure: ... most recent failure: ...: org.x.SomeException: why".
_JAVA_EXCEPTION = re.compile(r"(?:^|: )((?:[a-z_][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error))): ")
_PY4J_CALL = "An error occurred while calling"


def started(writer: Any, what: str, afresh: str) -> Any:
    """`writer.start()`: the query of `what` ("the alert job") running, or, where Spark refuses
    to start it (a checkpoint it cannot resume, an option it does not take), one line, with
    `afresh` (how to start that job afresh) where it is the checkpoint."""
    from pyspark.errors import PySparkException

    try:
        return writer.start()
    except PySparkException as exc:
        line = f"{what}'s streaming query did not start: {reason_line(str(exc))}"
        raise StreamingError(line + _resume_advice(str(exc), afresh)) from exc


def _resume_advice(message: str, afresh: str | None) -> str:
    """What follows a failure's line where Spark's `message` says the query's checkpoint
    cannot be resumed: `afresh`, how to start its job afresh."""
    if afresh is None or not _NOT_RESUMABLE.search(message):
        return ""
    return f"; its checkpoint cannot be resumed: {afresh}"


def kafka_out_of_reach(spark_message: str, delivery_error: BaseException | None) -> bool:
    """Whether the query failed because Kafka was out of reach: its source's Kafka client
    (Spark's message, or the delivery's failed Spark job) or the delivery's own producer."""
    if isinstance(delivery_error, KafkaOutOfReach):
        return True
    said = spark_message if delivery_error is None else str(delivery_error)
    return bool(_KAFKA_OUT_OF_REACH.search(said))


def kafka_reason(message: str) -> str | None:
    """Kafka's Java client error in a failed query's message, by its short name and on one
    line ("TimeoutException: Timeout of 60000ms expired before ..."), wherever Spark's message
    holds it (a Python foreachBatch's failure wraps it in a traceback); None if none is."""
    found = _KAFKA_OUT_OF_REACH.search(message)
    if found is None:
        return None
    line = message[found.end() :].split("\n", 1)[0]
    return f"{found[0].rsplit('.', 1)[1]}{line}"[:300]


def failure_line(
    query: str, spark_message: str, delivery_error: BaseException | None, afresh: str | None = None
) -> str:
    """One line for a failed query. Where the delivery raised, its own message: Spark's says
    only that "an exception was raised by the Python Proxy", the traceback on later lines.
    Where the query's checkpoint cannot be resumed, `afresh` (how to start its job afresh)."""
    if delivery_error is not None:
        message = str(delivery_error).strip() or type(delivery_error).__name__
    else:
        message = spark_message.strip()
    line = f"streaming query {query} failed: {reason_line(message)}"
    # The delivery's own Spark job (its collect) meets the state first, in most micro-batches.
    return line + _resume_advice(message, afresh)


def reason_line(message: str) -> str:
    """The one line of a failure's message that says why."""
    # An error of zkcdc's own raised on a Python worker (saved state it cannot read) is the
    # last line of the traceback Spark's message carries: that line is the reason.
    ours = [m[1] for m in _OWN_ERROR.finditer(message)]
    if ours:
        return ours[-1]
    return (_java_reason(message) if message else "no reason given")[:300]


def _java_reason(message: str) -> str:
    """The first line of `message`; for py4j's "An error occurred while calling o7.collect"
    (a Spark job the delivery ran failed), the innermost Java exception of the line after it,
    by its short name: "TimeoutException: Timeout of 60000ms expired before ..."."""
    lines = message.splitlines()
    if not lines[0].startswith(_PY4J_CALL) or len(lines) < 2:
        return lines[0]
    cause = lines[1].lstrip(": ")
    found = list(_JAVA_EXCEPTION.finditer(cause))
    if not found:
        return cause or lines[0]
    return f"{found[-1][2]}: {cause[found[-1].end() :]}"


class KafkaOutage:
    """How long the job waits before it starts its query again while Kafka is out of reach:
    full jitter, doubling from `first_s` to `most_s` across the failures of one outage. A
    failure `quiet_s` or more after the last one begins a new outage."""

    def __init__(
        self,
        first_s: float = 1.0,
        most_s: float = 30.0,
        quiet_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._backoff = Backoff(first_s, most_s, jitter)
        self._quiet_s, self._clock = quiet_s, clock
        self._last: float | None = None
        self.failures = 0  # of this outage

    def failed(self) -> float:
        """The wait before the next start, after one more failure."""
        now = self._clock()
        if self._last is not None and now - self._last >= self._quiet_s:
            self._backoff.succeeded()
            self.failures = 0
        self._last = now
        self.failures += 1
        return self._backoff.failed()
