"""Structured JSON logs on stderr, for zkcdc's own events and for kazoo's and librdkafka's."""

from __future__ import annotations

import logging
import sys

import structlog

_SHARED: list[structlog.typing.Processor] = [
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=_SHARED,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kazoo warns on every dropped connection; zkcdc logs its own session state changes.
    logging.getLogger("kazoo").setLevel("ERROR")
    # The schema registry client's HTTP library logs every request at INFO.
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel("WARNING")
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def quiet(name: str) -> logging.Logger:
    """A logger that drops everything: for a client library's per-connection complaints
    (librdkafka, kazoo) where zkcdc reports the failure itself, in one line."""
    logger = logging.getLogger(name)
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


def get(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)
