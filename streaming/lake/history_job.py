"""`zkcdc stream history` and `zkcdc replay LOG --lake`: the change records, from the changes
topic or an event log, into the lake's `changes` table as one streaming query, checkpointed so
a restart resumes where it stopped (changes_writer.py: nothing lost or doubled)."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zkcdc.ground import logs
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.change_source import KafkaInput, LogInput, read_change_structs
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.lake.changes_writer import ChangesWriter, query_app_id
from zkcdc.streaming.lake.lake_tables import (
    Table,
    changes_rows,
    check_local_lake,
    ensure_table,
    table_uri,
)

log = logs.get("zkcdc.history")

# A live history job looks for new records this often: the lake is read by people, later, so
# a second's delay costs nothing and fewer, larger commits make fewer files.
TRIGGER_S = 10


@dataclass(frozen=True)
class HistoryJobOptions:
    source: KafkaInput | LogInput
    lake: str
    checkpoint: Path
    master: str = "local[2]"
    driver_memory: str = "1g"
    available_now: bool = False  # what is there, then stop (a backfill)
    trigger_s: float = TRIGGER_S


def run_history(options: HistoryJobOptions, stop: threading.Event, spark: Any = None) -> None:
    """The query until `stop` is set (or, available-now, until the input is done). `spark`: a
    session with the lake (spark_session.session(lake=True)) to use instead of starting one."""
    check_local_lake(options.lake)
    own = spark is None
    if own:
        spark = session(options.master, "zkcdc-history", shuffle_partitions=2,
                        driver_memory=options.driver_memory, lake=True)  # fmt: skip
    query = None
    try:
        records = read_change_structs(spark, options.source)
        table = table_uri(options.lake, Table.CHANGES)
        ensure_table(spark, table, Table.CHANGES, changes_rows(records))
        checkpoint = str(options.checkpoint.resolve())
        writer = (
            records.writeStream.foreachBatch(
                ChangesWriter(
                    table,
                    query_app_id(checkpoint),
                    isinstance(options.source, KafkaInput),
                )
            )
            .option("checkpointLocation", checkpoint)
            .queryName("zkcdc-history")
        )
        writer = (
            writer.trigger(availableNow=True)
            if options.available_now
            else writer.trigger(processingTime=f"{options.trigger_s} seconds")
        )
        query = writer.start()
        while query.isActive and not stop.is_set():
            stop.wait(0.5)
        error = query.exception()
        if error is not None:
            raise StreamingError(f"the history job failed: {_first_line(error)}")
    finally:
        if query is not None:
            with contextlib.suppress(Exception):
                query.stop()
        if own:
            spark.stop()


def _first_line(error: Any) -> str:
    text = str(getattr(error, "desc", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__
