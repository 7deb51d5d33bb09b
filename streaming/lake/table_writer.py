"""A micro-batch into one of the lake's tables (`changes`, `alerts`), exactly once.

Two guards, for two ways a record could come twice:
- the same micro-batch again (the query restarted from its checkpoint after a crash between
  the table's commit and the checkpoint's): Delta's idempotent writes, `txnAppId` (the
  query's, stable across restarts) and `txnVersion` (the batch id), skip it;
- the same records in another query (a second backfill of a log, a live job over records a
  backfill wrote): rows whose key (`Table.key`) the table holds already are left out."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkcdc.ground import logs
from zkcdc.streaming.lake.lake_tables import Table, holds_rows

log = logs.get("zkcdc.history")


def query_app_id(checkpoint_uri: str) -> str:
    """A writer's Delta application id: one per checkpoint (a query's), so a restart keeps it."""
    return "zkcdc-history-" + hashlib.sha256(checkpoint_uri.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TableWriter:
    table: Table
    uri: str
    app_id: str
    rows_of: Callable[[Any], Any]  # a micro-batch -> the table's rows (lake_tables)
    # A topic can hold a record twice within one micro-batch (a log replayed into it twice);
    # an event log's records are each once in it, and the shuffle costs a backfill ~8 s per
    # million records.
    once_within_batch: bool = False
    # What else the batch's rows keep, after they are in the table (znode_versions.py):
    # given all of them, written now or before, it must do nothing twice.
    then: Callable[[Any, Any], None] | None = None

    def __call__(self, batch: Any, batch_id: int) -> None:
        key = list(self.table.key)
        rows = every = self.rows_of(batch)
        if self.once_within_batch:
            rows = every = rows.dropDuplicates(key)
        spark = rows.sparkSession
        fresh = not holds_rows(spark, self.uri)
        if not fresh:
            held = spark.read.format("delta").load(self.uri).select(*key)
            # The join on the partition columns reads only the batch's (cluster, day) folders
            # of the table (Spark's dynamic partition pruning), and of them the key columns.
            rows = rows.join(held, key, "left_anti")
        if self.table.sorted_by:  # within each task: no shuffle
            rows = rows.sortWithinPartitions(*self.table.sorted_by)
        (
            rows.write.format("delta")
            .mode("append")
            # A field a newer zkcdc's records have is a new column of the table.
            .option("mergeSchema", "true")
            .option("txnAppId", self.app_id)
            .option("txnVersion", batch_id)
            .save(self.uri)
        )
        if self.then is not None:
            if fresh:
                # The table held nothing before (a first backfill): what it holds now is the
                # batch, read back as Parquet's columns instead of decoding its input again.
                every = spark.read.format("delta").load(self.uri)
            self.then(spark, every)
        log.info("rows written", table=self.table.value, batch=batch_id)
