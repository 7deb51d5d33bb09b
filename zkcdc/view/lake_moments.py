"""What `zkcdc ui --lake` shows of a past moment, from the lake: the cluster's state records as
of then (`history state --at`), the alerts firing then (and those resolved in the minutes
before), the change rows around it, and where the neighbouring changes and the next alert
are, for the page's steps."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from zkcdc.history.state_at import state_at
from zkcdc.streaming.lake.history_queries import read_table
from zkcdc.streaming.lake.lake_tables import Table, table_uri, table_version
from zkcdc.view.event_rows import rows

AROUND_MS = 60_000  # the change rows shown either side of the moment, as a report shows them
RESOLVED_SHOWN_MS = 600_000  # a resolved alert stays on the alert timeline this long after
_ROW_COLUMNS = ("cluster", "seq", "ts_ms", "op", "path", "events")


@dataclass(frozen=True, order=True)
class Span:
    cluster: str
    start_ms: int
    end_ms: int


class LakeMoments:
    """Answers for the page, one at a time: a Spark session takes one question after another."""

    def __init__(self, spark: Any, lake: str) -> None:
        self._spark = spark
        self._lake = lake
        self._lock = threading.Lock()

    def spans(self) -> list[Span]:
        """Each cluster's first and last change in the lake."""
        from pyspark.sql import functions as F

        with self._lock:
            found = (
                read_table(self._spark, self._lake, Table.CHANGES)
                .groupBy("cluster")
                .agg(F.min("ts_ms").alias("start"), F.max("ts_ms").alias("end"))
                .collect()
            )
        return sorted(Span(r["cluster"], r["start"], r["end"]) for r in found)

    def at(self, cluster: str, t_ms: int) -> dict[str, Any]:
        """The page's model as of `t_ms` (see the module's docstring)."""
        with self._lock:
            state = state_at(self._spark, self._lake, cluster, t_ms)
            alerts, next_alert = self._alerts(cluster, t_ms)
            around, before, after = self._changes(cluster, t_ms)
        return {
            "cluster": cluster,
            "t": t_ms,
            "state": sorted(state.items()),
            "alerts": alerts,
            "rows": around,
            "prev_ms": before,
            "next_ms": after,
            "next_alert_ms": next_alert,
        }

    def _changes(self, cluster: str, t_ms: int) -> tuple[list[dict[str, Any]], Any, Any]:
        from pyspark.sql import functions as F

        def day(ms: int) -> Any:
            return F.to_date(F.timestamp_millis(F.lit(ms)))

        changes = read_table(self._spark, self._lake, Table.CHANGES).where(
            F.col("cluster") == cluster
        )
        low, high = t_ms - AROUND_MS, t_ms + AROUND_MS
        near = changes.where(
            F.col("day").between(day(low), day(high)) & F.col("ts_ms").between(low, high)
        )
        found: list[dict[str, Any]] = []
        for row in near.select(*_ROW_COLUMNS).orderBy("seq").collect():
            found.extend(rows(row.asDict(recursive=True)))
        # The neighbouring changes, looked for in the moment's own day first (one folder).
        bounds = (
            changes.where(F.col("day") == day(t_ms))
            .agg(
                F.max(F.when(F.col("ts_ms") < t_ms, F.col("ts_ms"))).alias("before"),
                F.min(F.when(F.col("ts_ms") > t_ms, F.col("ts_ms"))).alias("after"),
            )
            .collect()[0]
        )
        before, after = bounds["before"], bounds["after"]
        if before is None:
            before = changes.where(F.col("ts_ms") < t_ms).agg(F.max("ts_ms")).collect()[0][0]
        if after is None:
            after = changes.where(F.col("ts_ms") > t_ms).agg(F.min("ts_ms")).collect()[0][0]
        return found, before, after

    def _alerts(self, cluster: str, t_ms: int) -> tuple[list[dict[str, Any]], Any]:
        """Each alert as it stood at the moment (its latest record then): the firing ones, and
        those resolved within RESOLVED_SHOWN_MS before; and the next FIRING after."""
        from pyspark.sql import functions as F

        if table_version(self._spark, table_uri(self._lake, Table.ALERTS)) is None:
            return [], None
        alerts = read_table(self._spark, self._lake, Table.ALERTS).where(
            F.col("cluster") == cluster
        )
        fields = [c for c in alerts.columns if c not in ("at_ms", "day")]
        latest = (
            alerts.where(F.col("at_ms") <= t_ms)
            .groupBy("alert_id")
            .agg(F.max_by(F.struct(*fields), F.col("at_ms")).alias("a"))
            .select("a.*")
            .where((F.col("status") == "FIRING") | (F.col("ended_ms") >= t_ms - RESOLVED_SHOWN_MS))
        )
        shown = [row.asDict(recursive=True) for row in latest.collect()]
        upcoming = alerts.where((F.col("at_ms") > t_ms) & (F.col("status") == "FIRING"))
        next_alert = upcoming.agg(F.min("at_ms")).collect()[0][0]
        return shown, next_alert
