"""The Spark driver JVM's output as log events (streaming/job/jvm_log_lines.py): each line an
event at its level, a stack with the line it belongs to, nothing of the stage bars, the
routine of every start at debug, and no text that stops the reading."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcdc.streaming.job.jvm_log_lines import SOURCE, JvmEvent, JvmLines, event_of


def _all(lines: list[str]) -> list[JvmEvent]:
    reader = JvmLines()
    out: list[JvmEvent] = []
    for line in lines:
        out += reader.feed(line)
    return out + reader.flush()


@pytest.mark.parametrize(
    ("line", "level", "event", "source"),
    [
        ("26/12/05 21:34:32 WARN Utils: Set SPARK_LOCAL_IP if you need to",
         logging.WARNING, "Set SPARK_LOCAL_IP if you need to", "Utils"),
        ("26/12/05 21:34:32 ERROR RocksDB$$anon$1: Error closing RocksDB",
         logging.ERROR, "Error closing RocksDB", "RocksDB$$anon$1"),
        ("26/12/05 21:34:32 INFO SparkContext: Running Spark version 4.2.0",
         logging.INFO, "Running Spark version 4.2.0", "SparkContext"),
        ("26/12/05 21:34:32 FATAL SparkUncaughtExceptionHandler: gone",
         logging.CRITICAL, "gone", "SparkUncaughtExceptionHandler"),
        ("26/12/05 21:34:32 TRACE X: y", logging.DEBUG, "y", "X"),
        ("WARNING: Using incubator modules: jdk.incubator.vector",
         logging.DEBUG, "Using incubator modules: jdk.incubator.vector", SOURCE),
        ("WARNING: An illegal reflective access operation has occurred",
         logging.WARNING, "An illegal reflective access operation has occurred", SOURCE),
        ("26/12/05 21:34:33 WARN NativeCodeLoader: Unable to load native-hadoop library for "
         "your platform", logging.DEBUG,
         "Unable to load native-hadoop library for your platform", "NativeCodeLoader"),
        ("Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
         logging.DEBUG, "Using Spark's default log4j profile: "
         "org/apache/spark/log4j2-defaults.properties", SOURCE),
        ("Streaming TransformWithStateInPandas Python worker Starting execution of UDF: <f>.",
         logging.DEBUG,
         "Streaming TransformWithStateInPandas Python worker Starting execution of UDF: <f>.",
         SOURCE),
        ("Terminating due to java.lang.OutOfMemoryError: Java heap space", logging.ERROR,
         "Terminating due to java.lang.OutOfMemoryError: Java heap space", SOURCE),
        ('Exception in thread "main" java.lang.IllegalStateException: x', logging.ERROR,
         'Exception in thread "main" java.lang.IllegalStateException: x', SOURCE),
        ("a line PySpark's worker printed", logging.INFO, "a line PySpark's worker printed",
         SOURCE),
    ],
)  # fmt: skip
def test_a_line_is_an_event_at_its_level(line: str, level: int, event: str, source: str) -> None:
    assert _all([line + "\n"]) == [JvmEvent(level, event, source)]


@pytest.mark.parametrize("line", ["", "   ", "\n", "[Stage 3:=====>    (1 + 1) / 2]"])
def test_blank_lines_and_stage_bars_are_no_event(line: str) -> None:
    assert event_of(line) is None
    assert _all([line]) == []


def test_a_java_stack_goes_with_the_line_it_belongs_to() -> None:
    lines = [
        "26/12/05 21:40:01 ERROR RocksDB$$anon$1: Error closing RocksDB",
        "org.rocksdb.RocksDBException: interrupted",
        "\tat org.rocksdb.RocksDB.open(Native Method)",
        "Caused by: java.lang.InterruptedException",
        "\t... 12 more",
        "26/12/05 21:40:02 WARN TaskSetManager: Lost task 0.0",
    ]
    first, second = _all(lines)
    assert (first.level, first.event, first.source) == (
        logging.ERROR, "Error closing RocksDB", "RocksDB$$anon$1"
    )  # fmt: skip
    assert first.fields["exception"] == "\n".join(lines[1:5])
    assert second == JvmEvent(logging.WARNING, "Lost task 0.0", "TaskSetManager")
    assert "exception" not in second.fields


def test_a_python_traceback_a_worker_printed_stays_whole() -> None:
    lines = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "ValueError: bad"]  # fmt: skip
    (event,) = _all(lines)
    assert event.event == lines[0] and event.fields["exception"] == "\n".join(lines[1:])
    assert event.level == logging.ERROR


def test_bars_in_one_write_with_carriage_returns_leave_the_next_line_whole() -> None:
    """Spark's console bar ends each update in a carriage return: in a log file the JSON line
    after it began with the bars, and parsed as nothing."""
    bars = "\r[Stage 2:>   (0 + 2) / 2]\r\r[Stage 3:=>  (1 + 1) / 2]\r"
    assert _all([bars + "26/12/05 21:40:02 WARN X: after\n"]) == [
        JvmEvent(logging.WARNING, "after", "X")
    ]


def test_a_long_stack_keeps_its_first_lines_and_says_how_many_went() -> None:
    frames = [f"\tat a.B.c{n}(B.java:{n})" for n in range(JvmLines.MOST_STACK_LINES + 25)]
    (event,) = _all(["26/12/05 21:40:01 ERROR X: deep", *frames])
    kept = event.fields["exception"].split("\n")
    assert kept[:-1] == frames[: JvmLines.MOST_STACK_LINES]
    assert kept[-1] == "... 25 more lines"


def test_an_event_is_out_once_the_next_begins_and_the_rest_at_flush() -> None:
    reader = JvmLines()
    assert reader.feed("26/12/05 21:40:01 WARN X: one\n") == []  # a stack may follow
    assert reader.feed("26/12/05 21:40:01 WARN X: two\n") == [JvmEvent(logging.WARNING, "one", "X")]
    assert reader.flush() == [JvmEvent(logging.WARNING, "two", "X")]
    assert reader.flush() == []


@given(st.lists(st.text(max_size=200), max_size=30))
def test_any_text_reads_into_events_without_failing(lines: list[str]) -> None:
    """Whatever the JVM writes (a worker's bytes, half a line): events, each one line of text."""
    for event in _all(lines):
        assert isinstance(event.event, str) and event.event.strip()
        assert "\r" not in event.event
        assert event.level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                               logging.CRITICAL)  # fmt: skip
