"""Structured JSON logs on stderr, for zkcdc's own events and for kazoo's and librdkafka's.

One line a record: the event's fields, then `event`, `level`, `logger` and `timestamp` (ISO 8601,
UTC), and `exception` where a traceback goes with it. The standard library's logging only:
structlog, which wrote these lines before, imported rich and asyncio with it, ~0.25 s of every
command's start on a loaded 2-core machine (the test suite starts some 500 commands)."""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

_FIELDS = "zkcdc_fields"  # the LogRecord attribute that carries an event's fields


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


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kazoo warns on every dropped connection; zkcdc logs its own session state changes.
    logging.getLogger("kazoo").setLevel("ERROR")
    # The schema registry client's HTTP library logs every request at INFO.
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
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
