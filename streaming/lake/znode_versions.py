"""The `znodes` table: every version of every znode with the interval it was current in, so
"what was the tree at T" is a filter. Kept from each micro-batch of change records by one
MERGE:

- each record but a deletion is a new version: `from_seq`/`from_ms` its own, `to_seq`/`to_ms`
  the path's next record in the batch, or open (null) if none;
- the path's version that was open before the batch is closed by the path's first record in
  it (`to_op` says whether that was a deletion).

A path's records come in seq order (capture keys the changes topic by cluster and path, so
one path is in one Kafka partition; a log is read file by file), so the open version is the
one before. The MERGE is idempotent: a batch run again finds its versions there (matched on
the key, nothing done) and the open version after them (not before its first record)."""

from __future__ import annotations

from typing import Any

from zkcdc.ground.change_types import Op
from zkcdc.streaming.lake.lake_tables import Table, ensure_table, holds_rows

_ZNODE = ("data", "version", "czxid", "mzxid", "ctime_ms", "mtime_ms", "ephemeral_owner")
COLUMNS = (
    "cluster", "path", "topic", "partition", "broker", "from_seq", "from_ms", "to_seq", "to_ms",
    "to_op", "op", "znode",
)  # fmt: skip


def versions(changes: Any) -> Any:
    """Rows of `changes` -> the MERGE's source: the batch's versions (kind "version") and
    each path's first record (kind "close")."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # The path's hash first: the window's sort then tells rows of two paths apart by a long
    # (its sort prefix), not by comparing the paths, which share long beginnings.
    path = Window.partitionBy("path_hash", "cluster", "path").orderBy("seq")
    records = changes.where(F.col("op") != Op.HEARTBEAT.value).withColumn(
        "path_hash", F.xxhash64("cluster", "path")
    ).select(
        "cluster", "path", "topic", "partition", "broker", "seq", "ts_ms", "op", "after",
        F.lead("seq").over(path).alias("next_seq"),
        F.lead("ts_ms").over(path).alias("next_ms"),
        F.lead("op").over(path).alias("next_op"),
        F.row_number().over(path).alias("n"),
    )  # fmt: skip
    common = ["cluster", "path", "topic", "partition", "broker",
              F.col("seq").alias("from_seq"), F.col("ts_ms").alias("from_ms")]  # fmt: skip
    made = records.where(F.col("op") != Op.DELETE.value).select(
        *common, F.col("next_seq").alias("to_seq"), F.col("next_ms").alias("to_ms"),
        F.col("next_op").alias("to_op"), "op", F.col("after").alias("znode"),
        F.lit("version").alias("kind"),
    )  # fmt: skip
    closes = records.where(F.col("n") == 1).select(
        *common, F.lit(None).cast("long").alias("to_seq"), F.lit(None).cast("long").alias("to_ms"),
        F.col("op").alias("to_op"), "op", F.col("after").alias("znode"),
        F.lit("close").alias("kind"),
    )  # fmt: skip
    return made.unionByName(closes)


def merge_versions(uri: str, spark: Any, changes: Any) -> None:
    """The batch's `changes` rows into the table at `uri` (first: a TableWriter's `then`)."""
    from pyspark.sql import functions as F

    source = versions(changes)
    ensure_table(spark, uri, Table.ZNODES, source.drop("kind"))
    if not holds_rows(spark, uri):
        # Nothing to close or to find again (a first backfill): the versions are appended,
        # without the MERGE's join.
        made = source.where(F.col("kind") == "version").select(*COLUMNS)
        made.write.format("delta").mode("append").option("mergeSchema", "true").save(uri)
        return
    view = "zkcdc_znode_versions"
    source.createOrReplaceTempView(view)
    columns = ", ".join(COLUMNS)
    values = ", ".join(f"s.{c}" for c in COLUMNS)
    try:
        spark.sql(f"""
            MERGE INTO delta.`{uri}` t USING {view} s
            ON t.cluster = s.cluster AND t.path = s.path AND (
                (s.kind = 'version' AND t.from_seq = s.from_seq)
                OR (s.kind = 'close' AND t.to_seq IS NULL AND t.from_seq < s.from_seq))
            WHEN MATCHED AND s.kind = 'close' THEN
                UPDATE SET to_seq = s.from_seq, to_ms = s.from_ms, to_op = s.to_op
            WHEN NOT MATCHED AND s.kind = 'version' THEN
                INSERT ({columns}) VALUES ({values})
        """)
    finally:
        spark.catalog.dropTempView(view)
