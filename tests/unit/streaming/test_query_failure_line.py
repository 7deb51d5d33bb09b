"""A failed alert query is one line naming why: the delivery's own error where the delivery
raised (Spark's message then says only that the Python proxy raised, its traceback on later
lines), else the first line of Spark's."""

from __future__ import annotations

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_runner import failure_line

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


def test_an_error_without_words_is_named_by_its_type_and_the_line_is_bounded() -> None:
    assert failure_line("q1", PROXY, KeyError()) == "streaming query q1 failed: KeyError"
    assert failure_line("q1", "", None) == "streaming query q1 failed: no reason given"
    line = failure_line("q1", "x" * 5000, None)
    assert "\n" not in line and len(line) < 400
