"""`zkcdc history compact`: the lake's upkeep. A live job commits small files each trigger
(a day of 10 s triggers is thousands); compaction rewrites each table's files into few large
ones, `changes` clustered by what a timeline reads (Z-order on topic and partition), and
removes the files no version within the retention still needs (VACUUM). Time travel
reaches back as far as the retention (`--retain-hours`) keeps files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zkcdc.streaming.lake.lake_tables import (
    LakeError,
    Table,
    check_readable,
    first_line,
    table_detail,
    table_uri,
    table_version,
)

# Delta's own default (7 days): a reader of a version older than this may find its files gone.
RETAIN_HOURS = 168
# Compacted files' size: Delta's default (1 GiB) makes a day of a 100,000-partition cluster one
# file whose statistics span every topic, read whole by a partition's timeline; at 32 MiB the
# same day is ~14 Z-ordered files and a timeline reads one or two (BENCHMARKS, B10).
TARGET_FILE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class TableFiles:
    table: Table
    files_before: int
    files_after: int
    bytes_after: int


def compact(spark: Any, lake: str, retain_hours: int = RETAIN_HOURS) -> list[TableFiles]:
    if retain_hours < 0:
        raise LakeError("--retain-hours is 0 or more")
    out = []
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(TARGET_FILE_BYTES))
    for table in Table:
        uri = table_uri(lake, table)
        if table_version(spark, uri) is None:
            continue
        check_readable(spark, uri, table)
        before = table_detail(spark, uri)
        # Z-order on what a timeline filters on: a file's statistics then let a query skip
        # the files of other topics and partitions.
        zorder = table.clustered_by
        if retain_hours < RETAIN_HOURS:
            # Delta refuses a shorter retention unless its check is switched off for this.
            spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        try:
            spark.sql(
                f"OPTIMIZE delta.`{uri}`" + (f" ZORDER BY ({', '.join(zorder)})" if zorder else "")
            )
            spark.sql(f"VACUUM delta.`{uri}` RETAIN {retain_hours} HOURS")
        except Exception as exc:  # Spark's errors come through py4j as many kinds
            raise LakeError(f"cannot compact {uri}: {first_line(exc)}") from exc
        after = table_detail(spark, uri)
        out.append(TableFiles(table, before["numFiles"], after["numFiles"], after["sizeInBytes"]))
    if not out:
        raise LakeError(f"no tables in the lake at {lake}")
    return out
