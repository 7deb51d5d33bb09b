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
from zkcdc.streaming.lake.lake_tables import (
    LakeError,
    Table,
    check_readable,
    first_line,
    table_uri,
    table_version,
)
from zkcdc.streaming.lake.state_views import register_views


def read_table(spark: Any, lake: str, table: Table, as_of_version: int | None = None) -> Any:
    uri = table_uri(lake, table)
    check_readable(spark, uri, table)
    reader = spark.read.format("delta")
    if as_of_version is not None:
        reader = reader.option("versionAsOf", as_of_version)
    try:
        return reader.load(uri)
    except Exception as exc:  # a version the table does not have, among others
        raise LakeError(f"cannot read {table.value} at {uri}: {first_line(exc)}") from exc


def register_tables(spark: Any, lake: str, as_of_version: int | None = None) -> None:
    """Each table of the lake as a view of its name, and the entities' intervals over
    `znodes` (state_views); `changes` must be there, `alerts` may not (a lake kept from event
    logs alone)."""
    for table in Table:
        if table is not Table.CHANGES and table_version(spark, table_uri(lake, table)) is None:
            continue
        read_table(spark, lake, table, as_of_version).createOrReplaceTempView(table.value)
        if table is Table.ZNODES:
            register_views(spark)


def run_sql(spark: Any, lake: str, query: str, as_of_version: int | None = None) -> Any:
    register_tables(spark, lake, as_of_version)
    try:
        return spark.sql(query)
    except Exception as exc:  # Spark's analysis and parse errors
        raise LakeError(f"the query failed: {first_line(exc)}") from exc


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

    def entity(self) -> str:
        """The subject as the alerts name their entity (streaming/rules/alert_rules.py)."""
        if self.kind == "controller":
            return "controller"
        if self.kind == "broker":
            return f"broker/{self.number}"
        return f"{self.topic}/{self.number}"

    def records(self) -> Any:
        """Which records can hold the subject's events, on the columns a file's statistics
        keep (a partition's are its state znode's and its topic's)."""
        from pyspark.sql import functions as F

        if self.kind == "partition":
            # The partition's own znodes, and its topic's (no partition of their own).
            mine = F.col("partition").isNull() | (F.col("partition") == self.number)
            return (F.col("topic") == self.topic) & mine
        if self.kind == "controller":
            return F.col("path").isin("/controller", "/controller_epoch")
        return F.lit(True)

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
    """A change of the subject (an event, with its record's seq), or one of its alerts."""

    cluster: str
    ts_ms: int
    seq: int | None  # None for an alert
    event: dict[str, Any]  # the event's fields that are set, or the alert's

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
    """The subject's events in time order, and the FIRING and RESOLVED of its alerts among
    them (where the lake has an `alerts` table)."""
    from pyspark.sql import functions as F

    def within(time: str) -> Any:
        where = F.lit(True)
        if cluster is not None:
            where &= F.col("cluster") == cluster
        for bound, compare in ((since_ms, "ge"), (until_ms, "le")):
            if bound is None:
                continue
            day = F.to_date(F.timestamp_millis(F.lit(bound)))
            if compare == "ge":
                where &= (F.col(time) >= bound) & (F.col("day") >= day)
            else:
                where &= (F.col(time) <= bound) & (F.col("day") <= day)
        return where

    changes = read_table(spark, lake, Table.CHANGES)
    rows = (
        changes.where(within("ts_ms") & subject.records() & F.col("op").isin(*_LIVE_OPS))
        .select("cluster", "ts_ms", "seq", F.explode("events").alias("event"))
        .where(subject.condition())
        .select("cluster", "ts_ms", "seq", F.to_json("event").alias("event"))
        .collect()
    )
    entries = [
        TimelineEntry(r["cluster"], r["ts_ms"], r["seq"], orjson.loads(r["event"])) for r in rows
    ]
    if table_version(spark, table_uri(lake, Table.ALERTS)) is not None:
        alerts = read_table(spark, lake, Table.ALERTS)
        for a in alerts.where(within("at_ms") & (F.col("entity") == subject.entity())).collect():
            entries.append(TimelineEntry(a["cluster"], a["at_ms"], None, {
                "type": f"ALERT {a['status']}", "rule": a["rule"], "severity": a["severity"],
                "summary": a["summary"],
            }))  # fmt: skip
    # An alert after the change that raised it (same time): changes by seq, alerts last.
    return sorted(entries, key=lambda e: (e.cluster, e.ts_ms, e.seq is None, e.seq or 0))


_LIVE_OPS = ("CREATE", "UPDATE", "DELETE")


def clusters_in(spark: Any, lake: str) -> list[str]:
    changes = read_table(spark, lake, Table.CHANGES)
    return sorted(r["cluster"] for r in changes.select("cluster").distinct().collect())


def utc_text(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC, to the millisecond."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
