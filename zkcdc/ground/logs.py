"""Structured JSON logs on stderr, for zkcdc's own events and for kazoo's, librdkafka's and the
Spark driver JVM's.

One line a record: the event's fields, then `event`, `level`, `logger` and `timestamp` (ISO 8601,
UTC), and `exception` where a traceback goes with it. The standard library's logging only:
structlog, which wrote these lines before, imported rich and asyncio with it, ~0.25 s of every
command's start on a loaded 2-core machine (the test suite starts some 500 commands)."""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_FIELDS = "zkcdc_fields"  # the LogRecord attribute that carries an event's fields
LIBRDKAFKA_LOGGER = "zkcdc.librdkafka"  # where the Kafka clients' own lines go
SPARK_LOGGER = "zkcdc.spark"  # and the Spark driver JVM's (streaming/job/jvm_log_lines.py)


class EventLog:
    """A named logger that takes an event and its fields: `log.warning("lag", seconds=3)`."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    def debug(self, event: str, /, **fields: Any) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, /, **fields: Any) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, /, **fields: Any) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, /, **fields: Any) -> None:
        self._log(logging.ERROR, event, fields)

    def critical(self, event: str, /, **fields: Any) -> None:
        self._log(logging.CRITICAL, event, fields)

    def at(self, level: int, event: str, /, **fields: Any) -> None:
        """An event at a level given as a number (`logging.WARNING`): another process's."""
        self._log(level, event, fields)

    def exception(self, event: str, /, **fields: Any) -> None:
        """An error with the traceback of the exception being handled."""
        self._log(logging.ERROR, event, fields, exc_info=True)

    def _log(self, level: int, event: str, fields: dict[str, Any], exc_info: bool = False) -> None:
        if self._logger.isEnabledFor(level):
            # No %-formatting of the event: it is a name, its values are fields.
            self._logger.log(level, "%s", event, extra={_FIELDS: fields}, exc_info=exc_info)


class JsonLines(logging.Formatter):
    """Any logging record as one JSON object: zkcdc's events with their fields, a library's
    record with its formatted message as the event."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, _FIELDS, None)
        line: dict[str, Any] = dict(fields) if fields is not None else {}
        line["event"] = record.getMessage()
        line["level"] = record.levelname.lower()
        line["logger"] = record.name
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line["timestamp"] = stamp.isoformat().replace("+00:00", "Z")
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        # A value JSON has no form for (a path, a secret) goes as its repr: SecretStr's is masked.
        return json.dumps(line, default=repr)


# What differs between repeats of one complaint: librdkafka's timings and its own counts.
_TIMING = re.compile(r"\d+ ?ms\b")
_SUPPRESSED = re.compile(r", \d+ identical error\(s\) suppressed")


def repeat_of(message: str) -> str:
    """What a repeat of `message` has in common with it."""
    return _SUPPRESSED.sub("", _TIMING.sub("#", message))


class RepeatLimit(logging.Filter):
    """Each message once a window: its repeats within the window are counted, not written, and
    the next one written after it says how many there were (`repeated`). librdkafka reports
    every failed connection to every broker, ~6 lines a second a broker while a cluster is
    down: a daemon outliving an outage would write hundreds of thousands of them."""

    def __init__(
        self, window_s: float = 60.0, now: Callable[[], float] = time.monotonic, most: int = 1000
    ) -> None:
        super().__init__()
        self._window_s, self._now, self._most = window_s, now, most
        # message -> (when last written, how many repeats were held back since)
        self._shown: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()  # librdkafka logs from whichever thread polls

    def filter(self, record: logging.LogRecord) -> bool:
        key = f"{record.levelno} {repeat_of(record.getMessage())}"
        at = self._now()
        with self._lock:
            last = self._shown.pop(key, None)
            if last is not None and at - last[0] < self._window_s:
                self._shown[key] = (last[0], last[1] + 1)
                return False
            self._shown[key] = (at, 0)  # the newest last: the oldest go first
            while len(self._shown) > self._most:
                del self._shown[next(iter(self._shown))]
        if last is not None and last[1]:
            fields = dict(getattr(record, _FIELDS, None) or {})
            fields["repeated"] = last[1]
            setattr(record, _FIELDS, fields)
        return True


# What py4j's client server logs when a Python callback Spark made (a foreachBatch) raised.
_PY4J_CALLBACK_FAILED = "exception while executing the Python Proxy"


def _not_py4j_echo(record: logging.LogRecord) -> bool:
    """py4j (Spark's bridge) logs a failed call, traceback and all (to the root logger for a
    call into Java, to its own for a Python callback Spark made), and hands the error on as
    well (raised to the caller; returned to Spark, whose query fails with it): the job's own
    report of it is the one kept."""
    if f"{os.sep}py4j{os.sep}" not in record.pathname:
        return True
    return not (record.name == "root" or _PY4J_CALLBACK_FAILED in record.getMessage())


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    handler.addFilter(_not_py4j_echo)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Another process's lines, which say each retry of a failure again.
    for name in (LIBRDKAFKA_LOGGER, SPARK_LOGGER):
        logging.getLogger(name).filters[:] = [RepeatLimit()]
    # kazoo warns on every dropped connection; zkcdc logs its own session state changes.
    logging.getLogger("kazoo").setLevel("ERROR")
    # The schema registry client's HTTP library logs every request at INFO.
    # So do py4j's (Spark's bridge) for each command and connection, up to the exit, where
    # its "Closing down" lines came after a command's one-line error.
    for name in ("httpx", "httpx2", "httpcore", "httpcore2", "py4j"):
        logging.getLogger(name).setLevel("WARNING")


def quiet(name: str) -> logging.Logger:
    """A logger that drops everything: for a client library's per-connection complaints
    (librdkafka, kazoo) where zkcdc reports the failure itself, in one line."""
    logger = logging.getLogger(name)
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


def get(name: str) -> EventLog:
    return EventLog(name)
