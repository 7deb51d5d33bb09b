"""`zkcdc history`: questions to the lake's tables through Spark SQL.

- `sql`: any query, the tables registered under their names (`changes`).
- `timeline`: what changed for a partition, a broker or the controller, in a time range.
(`zkcdc history state --at` is zkcdc/history/state_at.py: it decodes znodes again.)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.lake.lake_tables import LakeError, Table, check_readable, table_uri


def read_table(spark: Any, lake: str, table: Table, as_of_version: int | None = None) -> Any:
    uri = table_uri(lake, table)
    check_readable(spark, uri, table)
    reader = spark.read.format("delta")
    if as_of_version is not None:
        reader = reader.option("versionAsOf", as_of_version)
    try:
        return reader.load(uri)
    except Exception as exc:  # a version the table does not have, among others
        first = str(exc).strip().splitlines()[0]
        raise LakeError(f"cannot read {table.value} at {uri}: {first}") from exc


def register_tables(spark: Any, lake: str, as_of_version: int | None = None) -> None:
    for table in Table:
        read_table(spark, lake, table, as_of_version).createOrReplaceTempView(table.value)


def run_sql(spark: Any, lake: str, query: str, as_of_version: int | None = None) -> Any:
    register_tables(spark, lake, as_of_version)
    try:
        return spark.sql(query)
    except Exception as exc:  # Spark's analysis and parse errors
        first = str(exc).strip().splitlines()[0]
        raise LakeError(f"the query failed: {first}") from exc


# -- timeline -------------------------------------------------------------------------------------
_CONTROLLER_EVENTS = (
    EventType.CONTROLLER_ELECTED,
    EventType.CONTROLLER_RESIGNED,
    EventType.CONTROLLER_EPOCH_CHANGED,
)
_BROKER_EVENTS = (
    EventType.BROKER_REGISTERED,
    EventType.BROKER_DEREGISTERED,
    EventType.BROKER_UPDATED,
    EventType.BROKER_FENCED,
    EventType.BROKER_UNFENCED,
    EventType.BROKER_CONTROLLED_SHUTDOWN,
    EventType.LOG_DIR_FAILED,
)


@dataclass(frozen=True)
class Subject:
    """What a timeline is about: `topic/partition`, `broker N` or `controller`."""

    kind: str
    topic: str | None = None
    number: int | None = None

    @staticmethod
    def parse(words: tuple[str, ...]) -> Subject:
        text = " ".join(words).strip()
        if text == "controller":
            return Subject("controller")
        if m := re.fullmatch(r"broker\s+(\d+)", text):
            return Subject("broker", number=int(m[1]))
        if m := re.fullmatch(r"(.+)/(\d+)", text):
            return Subject("partition", topic=m[1], number=int(m[2]))
        raise LakeError(
            f"a timeline is of TOPIC/PARTITION, 'broker N' or 'controller', not {text!r}"
        )

    def condition(self) -> Any:
        from pyspark.sql import functions as F

        event = F.col("event")
        if self.kind == "controller":
            return event["type"].isin([e.value for e in _CONTROLLER_EVENTS])
        if self.kind == "broker":
            return event["type"].isin([e.value for e in _BROKER_EVENTS]) & (
                event["broker_id"] == self.number
            )
        return (event["topic"] == self.topic) & (event["partition"] == self.number)


@dataclass(frozen=True)
class TimelineEntry:
    cluster: str
    ts_ms: int
    seq: int
    event: dict[str, Any]  # the event's fields that are set

    def as_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "ts_ms": self.ts_ms, "seq": self.seq, **self.event}


def timeline(
    spark: Any,
    lake: str,
    subject: Subject,
    since_ms: int | None = None,
    until_ms: int | None = None,
    cluster: str | None = None,
) -> list[TimelineEntry]:
    from pyspark.sql import functions as F

    changes = read_table(spark, lake, Table.CHANGES)
    where = F.lit(True)
    if cluster is not None:
        where &= F.col("cluster") == cluster
    if since_ms is not None:
        where &= F.col("ts_ms") >= since_ms
        where &= F.col("day") >= F.to_date(F.timestamp_millis(F.lit(since_ms)))
    if until_ms is not None:
        where &= F.col("ts_ms") <= until_ms
        where &= F.col("day") <= F.to_date(F.timestamp_millis(F.lit(until_ms)))
    rows = (
        changes.where(where & F.col("op").isin("CREATE", "UPDATE", "DELETE"))
        .select("cluster", "ts_ms", "seq", F.explode("events").alias("event"))
        .where(subject.condition())
        .select("cluster", "ts_ms", "seq", F.to_json("event").alias("event"))
        .orderBy("cluster", "seq")
        .collect()
    )
    return [
        TimelineEntry(r["cluster"], r["ts_ms"], r["seq"], orjson.loads(r["event"])) for r in rows
    ]


def clusters_in(spark: Any, lake: str) -> list[str]:
    changes = read_table(spark, lake, Table.CHANGES)
    return sorted(r["cluster"] for r in changes.select("cluster").distinct().collect())


def utc_text(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC, to the millisecond."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
