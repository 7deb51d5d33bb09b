"""Spark's foreachBatch with one trip to the JVM before a live micro-batch's rows come back.

PySpark's own foreachBatch wraps each micro-batch before the function sees it: the batch's
session fetched and wrapped anew (five py4j calls), the call site set and reset around the
collect, the schema fetched and parsed for `columns`: ~14 round trips a micro-batch, each a
thread hand-off between the driver's Python and its JVM. On a loaded two-core machine they
cost ~90 ms of every micro-batch before its Spark job even starts (ARCHITECTURE.md, B9), and
a record waits for up to two micro-batches. Here the function gets the batch's JVM frame as
it is: `rows()` is the one `collectToPython` call, the columns are the query's (known when it
is built), and a PySpark DataFrame is made only when asked for (`frame()`: a bounded run's
batch that Spark writes as files)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pyspark is imported where it is used: every `zkcdc` command loads this
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class LeanBatch:
    """One micro-batch, as foreachBatch's JVM hands it over."""

    def __init__(self, jdf: Any, spark: SparkSession, columns: tuple[str, ...]) -> None:
        self._jdf = jdf
        self._spark = spark
        self.columns = columns

    def rows(self) -> list[tuple[Any, ...]]:
        """The batch's rows, collected to the driver (what `DataFrame.collect()` does, less
        the call site it sets for Spark's UI)."""
        from pyspark.serializers import BatchedSerializer, CPickleSerializer
        from pyspark.util import _load_from_socket

        sock_info = self._jdf.collectToPython()
        serializer = BatchedSerializer(CPickleSerializer())  # type: ignore[no-untyped-call]
        with _load_from_socket(sock_info, serializer) as stream:
            return [tuple(row) for row in stream]

    def run_through(self) -> None:
        """Every task of the batch run to its end, its rows dropped (Spark's `noop` sink): a
        stateful stage's stores commit only when each of its tasks has run, and a re-run batch
        that skipped them would leave the next batch no state to start from."""
        self._jdf.write().format("noop").mode("overwrite").save()

    def frame(self) -> DataFrame:
        """The batch as a PySpark DataFrame, wrapped as PySpark's foreachBatch wraps it."""
        from pyspark.sql import SparkSession
        from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

        session = SparkSession(self._spark.sparkContext, self._jdf.sparkSession())
        return ClassicFrame(self._jdf, session)


# What Spark takes for its own stop interrupting a foreachBatch (StreamExecution's
# isInterruptionException, a regex over py4j's message: "py4j.protocol.Py4JJavaError: An error
# occurred while calling" ... "java.lang.InterruptedException"). Said in one short line: the
# regex recurses once per character, and over py4j's usual message (the whole Java stack
# trace) it overflowed the stream thread's stack.
INTERRUPTED = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch: "
    "java.lang.InterruptedException (the query is stopping)"
)
_INTERRUPTIONS = ("java.lang.InterruptedException", "java.nio.channels.ClosedByInterruptException")


# How long a job's stop waits for the micro-batch under way to finish before Spark interrupts
# it (`BatchCall.stop`): a supervisor's SIGTERM is answered (exit 0) within 30 s, Spark's own
# stop included.
STOP_WAIT_S = 15.0


class StopInterrupted(Exception):
    """The micro-batch under way when the job was asked to stop, abandoned: its records are
    read again at the next start (nothing of it was committed)."""


class BatchCall:
    """The Python side of Spark's `PythonForeachBatchFunction`, as PySpark's own
    (`pyspark.sql.utils.ForeachBatchFunction`) is, less the wrapping. `error` keeps what the
    function raised: the query's own exception shows only py4j's "raised by the Python Proxy".
    `stopping` (set by the job on a stop): an interruption of the batch under way is then
    Spark's stop, said to Spark as such and to nobody else; `idle`: no batch under way."""

    def __init__(
        self,
        spark: SparkSession,
        columns: tuple[str, ...],
        func: Callable[[LeanBatch, int], None],
    ) -> None:
        self.spark = spark
        self.columns = columns
        self.func = func
        self.error: Exception | None = None
        self.stopping = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        # py4j logs a Python function's exception with its traceback, Java's inside: on a stop
        # asked for, that is no error, and Kafka out of reach the job says in a warning of its
        # own as it starts the query again. Taken off by close(): another job in the same
        # process (replay's, the class archive's training) must see py4j's lines again.
        logging.getLogger("py4j.clientserver").addFilter(self._not_said_by_the_job)

    def _not_said_by_the_job(self, record: logging.LogRecord) -> bool:
        if self.stopping.is_set():
            return False
        raised = record.exc_info[1] if record.exc_info else None
        if raised is None or raised is not self.error:
            return True
        # Here, not at the top: every `zkcdc` command loads this module, few run a query.
        from zkcdc.streaming.job.query_failures import kafka_out_of_reach

        return not kafka_out_of_reach("", raised)

    def call(self, jdf: Any, batch_id: int) -> None:
        self.idle.clear()
        try:
            self.func(LeanBatch(jdf, self.spark, self.columns), batch_id)
        except Exception as e:
            if self.stopping.is_set() and interrupted(e):
                raise StopInterrupted(INTERRUPTED) from None
            self.error = e  # kept, as PySpark keeps it, and raised to the query
            raise
        finally:
            self.idle.set()

    def close(self) -> None:
        """The query is stopped: py4j's log as it was."""
        logging.getLogger("py4j.clientserver").removeFilter(self._not_said_by_the_job)

    def stop(self, query: Any, let_finish_s: float) -> None:
        """Stops `query`, this call's: the micro-batch under way is let finish for
        `let_finish_s`; past that, Spark's stop interrupts it, quietly (`stopping`)."""
        self.stopping.set()
        self.idle.wait(let_finish_s)
        with contextlib.suppress(Exception):
            query.stop()
        self.close()

    class Java:
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.execution.streaming.sources.PythonForeachBatchFunction"
        ]


def interrupted(error: BaseException) -> bool:
    """Whether a py4j error is the JVM's thread interrupted (its Java exception's class)."""
    head = str(error)[:2000]
    return any(name in head for name in _INTERRUPTIONS)


def foreach_batch(
    frame: DataFrame, func: Callable[[LeanBatch, int], None]
) -> tuple[DataStreamWriter, BatchCall]:
    """`frame.writeStream.foreachBatch(...)`, with `func` given LeanBatches; and the call, for
    what `func` raised."""
    from py4j.java_gateway import java_import
    from pyspark.java_gateway import ensure_callback_server_started

    spark = frame.sparkSession
    writer = frame.writeStream
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    java_import(gateway.jvm, "org.apache.spark.sql.execution.streaming.sources.*")
    call = BatchCall(spark, tuple(frame.columns), func)
    gateway.jvm.PythonForeachBatchHelper.callForeachBatch(writer._jwrite, call)
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    return writer, call
