"""The lake's tables (Delta Lake) and what every reader and writer of them checks first.

A lake is a folder URI (a local path, `file:`, `s3a://`, `abfss://`, `hdfs://`: any Hadoop
file system Spark is configured for) holding one Delta table per `Table`. Each table carries
the lake's layout version as a table property: a table written by a newer zkcdc is refused
rather than misread.

`changes` holds one row per change record: every field of ChangeRecord.avsc as a typed column
(the events an array of typed structs; the znode's raw bytes in `before.data` and `after.data`,
from which a newer zkcdc's decoders can derive events again) and `day`, the UTC date of
`ts_ms`. It is partitioned by cluster and day, so one cluster's day is one folder to read.
The record's own Avro bytes are not kept: they follow from the columns (`to_avro`), and
encoding them cost a backfill about a third of its time."""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from zkcdc.streaming.errors import StreamingError

# The lake's layout: bumped when a table changes in a way an older zkcdc cannot read. New
# columns (a new field of the records) are not such a change: Delta adds them to the table.
LAKE_VERSION = 1
VERSION_PROPERTY = "zkcdc.lake.version"


class LakeError(StreamingError):
    """A lake that cannot be written or read: its URI, a newer table, a time before its history."""


class Table(enum.StrEnum):
    CHANGES = "changes"
    ALERTS = "alerts"
    # One row per version of a znode, valid from the change that wrote it to the one that
    # replaced or deleted it (open while it is current): kept by MERGE (znode_versions.py).
    ZNODES = "znodes"

    @property
    def key(self) -> tuple[str, ...]:
        """The columns naming a row once: a row whose key the table holds is not written again."""
        if self is Table.CHANGES:
            return ("cluster", "day", "seq")
        if self is Table.ZNODES:
            return ("cluster", "path", "from_seq")
        return ("cluster", "day", "alert_id", "status")

    @property
    def clustered_by(self) -> tuple[str, ...]:
        """What a timeline filters the table on: compaction Z-orders files by these columns
        (upkeep.py), so a reader skips the files of other topics and partitions."""
        return ("topic", "partition") if self is Table.CHANGES else ()

    @property
    def sorted_by(self) -> tuple[str, ...]:
        """What each file a micro-batch writes is sorted by, within its task (table_writer.py):
        Parquet's page statistics then let a timeline skip the pages of other partitions in a
        day not yet compacted (over ten million rows, about 5 s unsorted and under 3 s
        sorted). The partition's number alone: an int, which Spark sorts by radix, where
        sorting by topic first cost a fifth of the write's CPU, for no quicker a timeline."""
        return ("partition",) if self is Table.CHANGES else ()

    @property
    def statistics_on(self) -> tuple[str, ...]:
        """The columns Delta keeps each file's minimum and maximum of (the ones readers filter
        on; partition columns need none). By default Delta takes the first 32 leaf columns,
        the nested znode's among them: a seventh of a backfill's write CPU. Empty: Delta's
        default (`alerts` has fewer columns)."""
        if self is Table.CHANGES:
            return ("seq", "op", "path", "ts_ms", "topic", "partition", "broker")
        if self is Table.ZNODES:
            return ("path", "topic", "partition", "broker", "from_seq", "from_ms", "to_seq",
                    "to_ms", "to_op", "op")  # fmt: skip
        return ()

    @property
    def distinct_per_row(self) -> tuple[str, ...]:
        """Columns whose values (nearly) all differ: Parquet writes them plain, without first
        filling a dictionary it then drops (a twelfth of a backfill's write CPU)."""
        if self is Table.CHANGES:
            znode = ("czxid", "mzxid", "ctime_ms", "mtime_ms")
            return ("seq", "zxid", "ts_ms", "captured_ms", *(f"{side}.{field}"
                    for side in ("before", "after") for field in znode))  # fmt: skip
        if self is Table.ZNODES:
            return ("from_seq", "from_ms", "to_seq", "to_ms")
        return ()

    @property
    def partitioned_by(self) -> tuple[str, ...]:
        # A version's interval spans days: the cluster alone partitions it.
        return ("cluster",) if self is Table.ZNODES else ("cluster", "day")


def parquet_settings() -> dict[str, str]:
    """Spark settings for a session that writes the tables: Parquet's, through Hadoop's
    configuration (Delta passes a write's own `parquet.*` options on to no file)."""
    return {f"spark.hadoop.parquet.enable.dictionary#{column}": "false"
            for table in Table for column in table.distinct_per_row}  # fmt: skip


# An alert as the alerts topic and `--alerts-out` hold it (streaming/rules/alert_records.py).
ALERT_SCHEMA = (
    "alert_id string, rule string, severity string, status string, cluster string, "
    "entity string, started_ms long, ended_ms long, summary string, details map<string,string>"
)


def lake_uri(lake: str) -> str:
    """The lake as Spark takes it: a path without a scheme is a local folder, made absolute."""
    if urlparse(lake).scheme in ("", "file"):
        local = Path(urlparse(lake).path if lake.startswith("file:") else lake)
        return str(local.expanduser().resolve())
    return lake.rstrip("/")


def table_uri(lake: str, table: Table) -> str:
    return f"{lake_uri(lake)}/{table.value}"


def check_local_lake(lake: str) -> None:
    """A local lake's folder made, or one line on why it cannot be: before Spark starts."""
    if urlparse(lake).scheme not in ("", "file"):
        return  # another file system: its own errors come when the tables are made
    folder = Path(lake_uri(lake))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".zkcdc-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise LakeError(f"cannot write the lake at {lake}: {exc.strerror or exc}") from exc


# What a znode's path says it is about, as columns of their own: a timeline's filter reads
# them and skips files by their statistics (the events' own fields are nested in an array).
_PARTITION_PATH = r"^/brokers/topics/([^/]+)/partitions/([0-9]{1,9})(/|$)"
_TOPIC_PATH = r"^/(?:brokers/topics|config/topics|admin/delete_topics)/([^/]+)"
_BROKER_PATH = r"^/brokers/ids/([0-9]{1,9})$"


def changes_rows(records: Any) -> Any:
    """A DataFrame of change records (one struct column `r`, change_source.read_change_structs)
    as rows of `changes`: the record's fields, then what its path is about (`topic`,
    `partition`, `broker`: null where it says nothing of one), then `day`."""
    from pyspark.sql import functions as F

    path = F.col("r.path")
    partition = F.regexp_extract(path, _PARTITION_PATH, 2)
    broker = F.regexp_extract(path, _BROKER_PATH, 1)
    topic = F.regexp_extract(path, _TOPIC_PATH, 1)
    return records.select(
        "r.*",
        F.when(topic != "", topic).alias("topic"),
        F.when(partition != "", partition.cast("int")).alias("partition"),
        F.when(broker != "", broker.cast("int")).alias("broker"),
        F.to_date(F.timestamp_millis(F.col("r.ts_ms"))).alias("day"),
    )


def alerts_rows(alerts: Any) -> Any:
    """A DataFrame of alerts (one string column `json`, an alert as JSON) as rows of `alerts`:
    the alert's fields, `at_ms` (the start of a FIRING, the end of a RESOLVED) and `day`."""
    from pyspark.sql import functions as F

    a = alerts.select(F.from_json("json", ALERT_SCHEMA).alias("a")).where(
        F.col("a.alert_id").isNotNull()
    )
    at = F.coalesce(F.col("a.ended_ms"), F.col("a.started_ms"))
    return a.select("a.*", at.alias("at_ms"), F.to_date(F.timestamp_millis(at)).alias("day"))


def first_line(error: BaseException) -> str:
    """A Spark error's first line (py4j's carry the Java trace after it), for a one-line error."""
    text = str(getattr(error, "desc", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def table_detail(spark: Any, uri: str) -> Any:
    """Delta's `DESCRIBE DETAIL` row of a table (files, bytes, properties): read from its log."""
    return spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]


def holds_rows(spark: Any, uri: str) -> bool:
    """Whether the table has any data file (no file is read)."""
    return bool(table_detail(spark, uri)["numFiles"])


def table_version(spark: Any, uri: str) -> int | None:
    """The lake version a table was written with; None where no table is."""
    jvm = spark.sparkContext._jvm
    if not jvm.io.delta.tables.DeltaTable.isDeltaTable(spark._jsparkSession, uri):
        return None
    properties = table_detail(spark, uri)["properties"] or {}
    try:
        return int(properties.get(VERSION_PROPERTY, "0"))
    except ValueError:
        return 0


def check_readable(spark: Any, uri: str, table: Table) -> None:
    """One line if the table is missing or was written by a newer zkcdc."""
    version = table_version(spark, uri)
    if version is None:
        raise LakeError(f"no {table.value} table in the lake at {uri.rsplit('/', 1)[0]}")
    if version > LAKE_VERSION:
        raise LakeError(
            f"the {table.value} table at {uri} was written by a newer zkcdc (lake version "
            f"{version}; this one reads up to {LAKE_VERSION}): upgrade zkcdc to read it"
        )


def ensure_table(spark: Any, uri: str, table: Table, rows: Any) -> None:
    """The table made (empty, with `rows`' columns) if missing; else checked readable."""
    if table_version(spark, uri) is not None:
        check_readable(spark, uri, table)
        return
    empty = spark.createDataFrame([], rows.schema)
    view = f"zkcdc_empty_{table.value}"
    empty.createOrReplaceTempView(view)
    partitioned = ", ".join(table.partitioned_by)
    try:
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{uri}` USING delta "
            f"PARTITIONED BY ({partitioned}) "
            f"TBLPROPERTIES ('{VERSION_PROPERTY}' = '{LAKE_VERSION}'{_own_properties(table)}) "
            f"AS SELECT * FROM {view}"
        )
    except Exception as exc:  # Spark's errors come through py4j as many kinds
        raise LakeError(
            f"cannot write the lake at {uri.rsplit('/', 1)[0]}: {first_line(exc)}"
        ) from exc
    finally:
        spark.catalog.dropTempView(view)


def _own_properties(table: Table) -> str:
    statistics = ""
    if table.statistics_on:
        statistics = f", 'delta.dataSkippingStatsColumns' = '{','.join(table.statistics_on)}'"
    # Closing a version's interval updates one row of a file: with deletion vectors Delta marks
    # it in a small side file instead of rewriting the whole file.
    if table is Table.ZNODES:
        return statistics + ", 'delta.enableDeletionVectors' = 'true'"
    return statistics
