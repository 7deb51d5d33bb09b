"""A client library's complaint repeated many times a second (librdkafka while brokers are
down) is written once a window, the next line saying how many were held back; other
messages, and the same one after the window, go through."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from manual_clock import ManualClock

from zkcdc.ground import logs

REFUSED = (
    "FAIL [rdkafka#producer-6] [thrd:127.0.0.1:{port}/bootstrap]: 127.0.0.1:{port}/bootstrap: "
    "Connect to ipv4#127.0.0.1:{port} failed: Connection refused (after {ms}ms in state "
    "CONNECT{suppressed})"
)


def refused(port: int, ms: int = 0, n: int = 0) -> str:
    """librdkafka's line; from the second on, its own count of the ones it held back."""
    return REFUSED.format(
        port=port, ms=ms, suppressed=f", {n} identical error(s) suppressed" * bool(n)
    )


def _logger(limit: logs.RepeatLimit) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonLines())
    logger = logging.getLogger(f"test.repeats.{uuid.uuid4().hex}")
    logger.addHandler(handler)
    logger.addFilter(limit)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, out


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_repeats_within_the_window_are_held_and_counted_on_the_next_line_after_it() -> None:
    clock = ManualClock()
    logger, out = _logger(logs.RepeatLimit(window_s=60, now=clock))
    for i in range(100):  # ~6 a second, each with its own timing and librdkafka's own count
        clock.now = i / 6
        logger.info(refused(9092, i % 7, i))
    clock.now = 61.0
    logger.info(refused(9092, 3, 100))
    lines = _lines(out)
    assert len(lines) == 2
    assert "repeated" not in lines[0]
    assert lines[1]["repeated"] == 99 and "9092" in str(lines[1]["event"])


def test_each_broker_and_each_level_is_a_message_of_its_own() -> None:
    logger, out = _logger(logs.RepeatLimit(window_s=60, now=ManualClock()))
    for _ in range(5):
        for port in (9092, 9093, 9094):
            logger.info(refused(port))
        logger.warning(refused(9092))
    lines = _lines(out)
    assert [(line["level"], str(line["event"]).count("9093")) for line in lines] == [
        ("info", 0), ("info", 3), ("info", 0), ("warning", 0)
    ]  # fmt: skip


def test_a_line_after_a_quiet_window_says_nothing_of_repeats() -> None:
    clock = ManualClock()
    logger, out = _logger(logs.RepeatLimit(window_s=60, now=clock))
    logger.info("Disconnected")
    clock.now = 120.0
    logger.info("Disconnected")
    assert [line.get("repeated") for line in _lines(out)] == [None, None]


@given(st.lists(st.integers(0, 50), max_size=300))
def test_the_messages_kept_in_mind_stay_bounded(messages: list[int]) -> None:
    limit = logs.RepeatLimit(window_s=60, now=ManualClock(), most=10)
    logger, out = _logger(limit)
    for m in messages:
        logger.info(f"complaint {m:02d}")  # zero-padded: a number the key keeps as it is
    assert len(limit._shown) <= 10
    shown = [str(line["event"]) for line in _lines(out)]
    assert set(shown) == {f"complaint {m:02d}" for m in messages}


@pytest.mark.parametrize(
    ("logger", "lines"),
    [
        (logs.LIBRDKAFKA_LOGGER, [refused(1, i, i) for i in range(50)]),
        # The Spark driver's Kafka source says each try to reach a broker again.
        (logs.SPARK_LOGGER, ["Error getting Kafka offsets; retrying in 1000 ms"] * 50),
    ],
)
def test_a_command_writes_another_processs_repeats_once_and_its_own_events_every_time(
    logger: str, lines: list[str]
) -> None:
    script = (
        "import logging\n"
        "from zkcdc.ground import logs\n"
        "logs.configure()\n"
        f"lines = {lines!r}\n"
        "for line in lines:\n"
        f"    logging.getLogger({logger!r}).info(line)\n"
        "    logs.get('zkcdc.capture').warning('still down')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loggers = [json.loads(line)["logger"] for line in done.stderr.splitlines()]
    assert loggers.count(logger) == 1 and loggers.count("zkcdc.capture") == 50
