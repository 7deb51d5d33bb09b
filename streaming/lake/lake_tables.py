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


# The key of a change record in the lake, and how `changes` is partitioned.
CHANGE_KEY = ("cluster", "day", "seq")
CHANGES_PARTITIONED_BY = ("cluster", "day")


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


def changes_rows(records: Any) -> Any:
    """A DataFrame of change records (one struct column `r`, change_source.read_change_structs)
    as rows of `changes`."""
    from pyspark.sql import functions as F

    return records.select("r.*", F.to_date(F.timestamp_millis(F.col("r.ts_ms"))).alias("day"))


def table_version(spark: Any, uri: str) -> int | None:
    """The lake version a table was written with; None where no table is."""
    jvm = spark.sparkContext._jvm
    if not jvm.io.delta.tables.DeltaTable.isDeltaTable(spark._jsparkSession, uri):
        return None
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{uri}`").collect()[0]
    properties = detail["properties"] or {}
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
    partitioned = ", ".join(CHANGES_PARTITIONED_BY)
    try:
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{uri}` USING delta "
            f"PARTITIONED BY ({partitioned}) "
            f"TBLPROPERTIES ('{VERSION_PROPERTY}' = '{LAKE_VERSION}') "
            f"AS SELECT * FROM {view}"
        )
    except Exception as exc:  # Spark's errors come through py4j as many kinds
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LakeError(f"cannot write the lake at {uri.rsplit('/', 1)[0]}: {first}") from exc
    finally:
        spark.catalog.dropTempView(view)
