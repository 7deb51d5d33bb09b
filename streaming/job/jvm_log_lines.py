"""The Spark driver JVM's output as zkcdc's log events: its log4j lines, the Java stacks that
go with them, and what its launcher and PySpark's workers print.

Every other line a command writes on stderr is one JSON object (ground/logs.py); the JVM's
output, left as it was, came between them as plain text: ~15 lines at Spark's start, a Java
stack of 50-400 lines for each error, and the console's stage bars, which in a log file ran
into the next line, so that a micro-batch's own line no longer parsed as JSON. Here each
line becomes an event, a stack goes with the line it belongs to (`exception`), the bars go,
and what only says Spark started the way it always does is debug.

Pure: the driver_jvm module reads the JVM's pipes and logs what `JvmLines` makes of them."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

# Spark's default log4j2 layout: "%d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex".
_LOG4J = re.compile(
    r"(\d\d/\d\d/\d\d \d\d:\d\d:\d\d) (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ([^\s:]+): ?(.*)"
)
_LEVELS = {
    "TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
    "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
}  # fmt: skip
# A line of a stack: a Java frame or a Python one, "... 12 more", the cause, or the error itself
# (a class name, qualified or not, that names an error: "java.io.IOException: ...").
_STACK = re.compile(
    r"\s|Caused by:|Suppressed:|Traceback \(most recent call last\)|"
    r"(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Error|Exception|Throwable|Exit|Interrupt)\b"
)
# The console's stage bars (off in zkcdc's sessions, and never an event if on).
_STAGE_BAR = re.compile(r"\[Stage \d+:")
# What log4j and PySpark print at every start, the same each time (PySpark's stateful worker,
# five lines at each query's start).
_ROUTINE = (
    "Using Spark's default log4j profile",
    "Setting default log level to",
    "To adjust logging level use sc.setLogLevel",
    "Starting Streaming TransformWithState",
    "Streaming TransformWithState",
)
# Spark's warnings at every start that ask nothing of a user: Hadoop's native library is not
# looked for, Spark's own launcher adds the Vector API module, and a streaming query runs
# without adaptive execution by design.
_ROUTINE_WARNINGS = (
    ("NativeCodeLoader", "Unable to load native-hadoop library"),
    ("ResolveWriteToStream", "spark.sql.adaptive.enabled is not supported in streaming"),
    ("jvm", "Using incubator modules: jdk.incubator.vector"),
)
_LAUNCHER_WARNING = "WARNING: "  # the java launcher's own
# What the JVM itself prints when it ends badly (an uncaught exception, its heap gone under
# ExitOnOutOfMemoryError, a crash), and a Python worker's traceback.
_JVM_ERRORS = (
    "Exception in thread ", "Terminating due to ", "# A fatal error has been detected",
    "Traceback (most recent call last)",
)  # fmt: skip
SOURCE = "jvm"  # an event's `source` where no Java logger said it


@dataclass
class JvmEvent:
    level: int
    event: str
    source: str  # the Java logger's short name, or SOURCE
    stack: list[str] = field(default_factory=list)

    @property
    def fields(self) -> dict[str, str]:
        out = {"source": self.source}
        if self.stack:
            out["exception"] = "\n".join(self.stack)
        return out


def event_of(line: str) -> JvmEvent | None:
    """The event a line starts (None: a line that is none: blank, a stage bar)."""
    text = line.strip()
    if not text or _STAGE_BAR.match(text):
        return None
    header = _LOG4J.match(text)
    if header is not None:
        event = JvmEvent(_LEVELS[header.group(2)], header.group(4), header.group(3))
    elif text.startswith(_LAUNCHER_WARNING):
        event = JvmEvent(logging.WARNING, text[len(_LAUNCHER_WARNING) :], SOURCE)
    elif text.startswith(_JVM_ERRORS):
        event = JvmEvent(logging.ERROR, text, SOURCE)
    else:
        event = JvmEvent(logging.DEBUG if text.startswith(_ROUTINE) else logging.INFO, text, SOURCE)
    if any(event.source == source and event.event.startswith(said)
           for source, said in _ROUTINE_WARNINGS):  # fmt: skip
        event.level = logging.DEBUG
    return event


class JvmLines:
    """The JVM's lines in, events out: an event is out once the next one begins, or at
    `flush` (the reader's: when the pipe has been quiet for a moment, and at its end), since
    until then a stack may still follow it."""

    # A stack longer than this keeps its first lines and says how many it left out.
    MOST_STACK_LINES = 200

    def __init__(self) -> None:
        self._pending: JvmEvent | None = None
        self._left_out = 0

    def feed(self, line: str) -> list[JvmEvent]:
        # A console bar ends in a carriage return, not a newline: each part is a line.
        out: list[JvmEvent] = []
        for part in line.split("\r"):
            out += self._line(part.rstrip("\n"))
        return out

    def _line(self, line: str) -> list[JvmEvent]:
        if not line.strip():
            return []
        pending = self._pending
        if pending is not None and not _LOG4J.match(line) and _STACK.match(line):
            if len(pending.stack) < self.MOST_STACK_LINES:
                pending.stack.append(line.rstrip())
            else:
                self._left_out += 1
            return []
        out = self.flush()
        self._pending = event_of(line)
        return out

    def flush(self) -> list[JvmEvent]:
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        if self._left_out:
            pending.stack.append(f"... {self._left_out} more lines")
            self._left_out = 0
        return [pending]
