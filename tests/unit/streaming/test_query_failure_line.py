"""A failed alert query is one line naming why: the delivery's own error where the delivery
raised (Spark's message then says only that the Python proxy raised, its traceback on later
lines), else the first line of Spark's."""

from __future__ import annotations

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.query_failures import failure_line
from zkcdc.streaming.job.saved_state import AFRESH

PROXY = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call"
    ' last):\n  File "/x/py4j/clientserver.py", line 644, in _call_proxy\n'
    "zkcdc.streaming.errors.StreamingError: records not delivered to zkcdc.alerts within 60 s"
)


def test_a_delivery_that_raised_is_named_by_its_own_message_not_the_proxys() -> None:
    error = StreamingError("records not delivered to zkcdc.alerts within 60 s")
    line = failure_line("q1", PROXY, error)
    assert line == "streaming query q1 failed: records not delivered to zkcdc.alerts within 60 s"


def test_a_failure_in_spark_itself_gives_the_first_line_of_sparks_message() -> None:
    message = "[STATE_STORE_PROVIDER_DOES_NOT_SUPPORT] a reason\n\tat org.apache.spark.X"
    assert failure_line("q1", message, None) == (
        "streaming query q1 failed: [STATE_STORE_PROVIDER_DOES_NOT_SUPPORT] a reason"
    )


def test_state_spark_cannot_load_from_the_checkpoint_says_how_to_start_afresh() -> None:
    """What the check before Spark's start cannot see (a changelog's insides, an SST file's):
    Spark's own error, and what to do."""
    for message in (
        "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state.  "
        "SQLSTATE: 58030\n\tat org.apache.spark.X",
        "[STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY] Cannot restart streaming query",
        "Job aborted: [CANNOT_READ_STREAMING_STATE_FILE] Error reading streaming state file",
        # a sharded checkpoint whose layout marker is gone, read as the one-group layout
        "[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator "
        "name does not match with the operator in state metadata.",
        "[STDS_FAILED_TO_READ_OPERATOR_METADATA] Failed to read the operator metadata for "
        "checkpointLocation=file:/c/alerts/state/0 and batchId=1.",
        "[STDS_FAILED_TO_READ_STATE_SCHEMA] Failed to read the state schema.",
        "[STATE_STORE_UNEXPECTED_EMPTY_FILE_IN_ROCKSDB_ZIP] Detected an empty file 000008.sst",
        "[STATE_STORE_ROW_CHECKSUM_VERIFICATION_FAILED] Row checksum verification failed",
    ):
        line = failure_line("q1", message, None, AFRESH)
        assert "\n" not in line and line.endswith(AFRESH), line
    assert AFRESH not in failure_line(
        "q1", "[STATE_STORE_PROVIDER_DOES_NOT_SUPPORT] x", None, AFRESH
    )
    # Met by the delivery's collect (py4j's error, Spark's on its second line)
    collect = RuntimeError(
        "An error occurred while calling o91.collectToPython.\n: org.apache.spark."
        "SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 1 times, "
        "most recent failure: org.apache.spark.SparkException: [CANNOT_LOAD_STATE_STORE."
        "UNCATEGORIZED] An error occurred during loading state.  SQLSTATE: 58030"
    )
    line = failure_line("q1", PROXY, collect, AFRESH)
    assert "CANNOT_LOAD_STATE_STORE" in line and line.endswith(AFRESH), line


def test_an_error_without_words_is_named_by_its_type_and_the_line_is_bounded() -> None:
    assert failure_line("q1", PROXY, KeyError()) == "streaming query q1 failed: KeyError"
    assert failure_line("q1", "", None) == "streaming query q1 failed: no reason given"
    line = failure_line("q1", "x" * 5000, None)
    assert "\n" not in line and len(line) < 400


def test_saved_state_a_worker_cannot_read_is_named_by_its_own_line_that_says_what_to_do() -> None:
    from zkcdc.streaming.job.saved_state import read_engine
    from zkcdc.streaming.rules.engine_record import UnreadableState
    from zkcdc.streaming.rules.rule_settings import RuleSettings

    try:
        read_engine(b"\x00garbage", RuleSettings(), 1)
    except UnreadableState as exc:
        refused = exc
    else:
        raise AssertionError("garbage read as saved state")
    spark = (
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker.\n"
        'Traceback (most recent call last):\n  File "/x/alert_job.py", line 9, in _run\n'
        f"zkcdc.streaming.rules.engine_record.UnreadableState: {refused}\n\tat org.apache.X"
    )
    line = failure_line("q1", spark, None)
    assert line == f"streaming query q1 failed: {refused}"
    assert "\n" not in line and "a new --checkpoint" in line
    assert "without losing an alert" in line


def test_a_shards_bucket_that_cannot_be_read_says_how_to_start_afresh_too() -> None:
    import pytest

    from zkcdc.streaming.job.saved_state import read_partitions, read_topics
    from zkcdc.streaming.rules import engine_record
    from zkcdc.streaming.rules.engine_record import UnreadableState

    damaged = engine_record.encode_topics({"t": {1, 2}})[:-2]
    for read, blob in ((read_topics, damaged), (read_partitions, b"\x00garbage")):
        with pytest.raises(UnreadableState, match="a new --checkpoint"):
            read(blob)


def test_a_query_spark_refuses_to_start_is_one_line_with_how_to_start_afresh() -> None:
    """Spark refuses some checkpoints only when the query starts (raised by `start()`, not
    the query's failure): one line of the job's, not a traceback."""
    import pytest
    from pyspark.errors import PySparkException

    from zkcdc.streaming.job.query_failures import started

    class Refused:
        def __init__(self, message: str) -> None:
            self.message = message

        def start(self) -> None:
            raise PySparkException(message=self.message)

    missing = (
        "[STREAMING_CHECKPOINT_MISSING_METADATA_FILE] Checkpoint location file:/c/alerts is in "
        "an inconsistent state: the metadata file is missing.\n\tat org.apache.spark.X"
    )
    with pytest.raises(StreamingError) as refused:
        started(Refused(missing), "the alert job", AFRESH)
    line = str(refused.value)
    assert line.startswith("the alert job's streaming query did not start: [STREAMING_CHECK")
    assert "\n" not in line and line.endswith(AFRESH)
    with pytest.raises(StreamingError, match=r"did not start: a bad option$"):
        started(Refused("a bad option"), "the history job", "x")
