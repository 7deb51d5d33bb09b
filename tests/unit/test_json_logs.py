"""zkcdc's log lines: one JSON object a record on stderr, for its own events and for the
libraries' records, whatever the values; and a command's start does not pay for them."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from zkcdc.ground import logs


@contextlib.contextmanager
def formatted_to_buffer(name: str) -> Iterator[io.StringIO]:
    """The records of logger `name`, at INFO and up, formatted into a buffer (and not passed on)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonLines())
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield out
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def written() -> Iterator[tuple[str, io.StringIO]]:
    """A logger name of this test's own whose records go, formatted, to a buffer."""
    name = f"zkcdc.test.{uuid.uuid4().hex[:8]}"
    with formatted_to_buffer(name) as out:
        yield name, out


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_an_event_is_one_json_line_with_its_fields_level_logger_and_utc_time(written):
    name, out = written
    before = datetime.datetime.now(datetime.UTC)
    logs.get(name).warning("capture lagging", seconds=3.5, path="/brokers/ids/1", ok=None)
    (line,) = lines(out)
    stamp = line.pop("timestamp")
    assert line == {
        "seconds": 3.5,
        "path": "/brokers/ids/1",
        "ok": None,
        "event": "capture lagging",
        "level": "warning",
        "logger": name,
    }
    assert isinstance(stamp, str) and stamp.endswith("Z")
    when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert before - datetime.timedelta(seconds=1) <= when <= datetime.datetime.now(datetime.UTC)


def test_each_level_is_named_and_those_below_the_loggers_level_are_dropped(written):
    name, out = written
    log = logs.get(name)
    log.debug("not shown")
    log.info("i")
    log.error("e")
    log.critical("c")
    assert [(line["event"], line["level"]) for line in lines(out)] == [
        ("i", "info"),
        ("e", "error"),
        ("c", "critical"),
    ]


def test_a_librarys_record_has_its_formatted_message_as_the_event(written):
    name, out = written
    logging.getLogger(name).warning("connection to %s lost", "127.0.0.1:2181")
    (line,) = lines(out)
    assert line["event"] == "connection to 127.0.0.1:2181 lost"
    assert line["level"] == "warning" and line["logger"] == name


def test_an_exception_goes_with_its_traceback(written):
    name, out = written
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError:
        logs.get(name).exception("rule failed", rule="broker_down")
    (line,) = lines(out)
    assert line["event"] == "rule failed" and line["level"] == "error"
    assert line["rule"] == "broker_down"
    assert "ZeroDivisionError" in str(line["exception"])


def test_a_value_json_has_no_form_for_goes_as_its_repr_and_a_secret_stays_masked(written):
    name, out = written
    secret = "hunter2-" + uuid.uuid4().hex
    logs.get(name).info("connecting", password=SecretStr(secret), state_dir=Path("/var/zk"))
    assert secret not in out.getvalue()
    (line,) = lines(out)
    assert line["password"] == repr(SecretStr(secret))
    assert line["state_dir"] == repr(Path("/var/zk"))


scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary()
values = scalars | st.lists(scalars, max_size=3) | st.dictionaries(st.text(), scalars, max_size=3)


@given(event=st.text(), fields=st.dictionaries(st.text(), values, max_size=3))
def test_any_event_and_fields_make_exactly_one_line_that_reads_back(event, fields):
    name = "zkcdc.test.fuzz"  # hypothesis runs the examples in one call: no per-test fixture
    with formatted_to_buffer(name) as out:
        logs.get(name).info(event, **fields)
    (line,) = lines(out)
    assert line["event"] == event and line["logger"] == name


def test_a_command_writes_json_lines_on_stderr_and_starts_without_structlog_or_rich():
    script = (
        "import logging, sys\n"
        "from zkcdc.ground import logs\n"
        "logs.configure()\n"
        "logs.get('zkcdc.capture').warning('in sync', znodes=3)\n"
        "logging.getLogger('kazoo.client').warning('connection dropped')\n"  # quietened
        "logging.getLogger('kazoo.client').error('session expired')\n"
        "print(sorted(m for m in ('structlog', 'rich', 'asyncio') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(e["logger"], e["event"], e["level"]) for e in events] == [
        ("zkcdc.capture", "in sync", "warning"),
        ("kazoo.client", "session expired", "error"),
    ]
    assert events[0]["znodes"] == 3
    assert done.stdout.strip() == "[]"  # none of them loaded to write a log line


def test_py4js_own_report_of_a_failed_call_is_dropped_and_the_rest_of_the_root_loggers_kept():
    """py4j logs a failed call to the root logger and raises it to the caller too (a Spark
    driver gone: one record from each thread that asked), and a failed callback (foreachBatch)
    to its own logger and to Spark too; the caller's one line is kept."""
    import py4j.java_gateway

    def record(
        name: str, pathname: str, message: str = "Exception while sending command."
    ) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, pathname, 1, message, None, None)

    out = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.configure()
        handler = root.handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(out)
        assert not handler.filter(record("root", py4j.java_gateway.__file__))
        assert handler.filter(record("root", __file__))
        assert handler.filter(record("py4j.java_gateway", py4j.java_gateway.__file__))
        # A foreachBatch that raised: py4j's client server says so, traceback and all, and
        # Spark's query fails with the error, which the job reports in its one line.
        callback = "There was an exception while executing the Python Proxy on the Python Side."
        assert not handler.filter(record("py4j.clientserver", py4j.java_gateway.__file__, callback))
        assert handler.filter(record("zkcdc.stream", __file__, callback))
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
