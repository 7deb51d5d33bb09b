"""The cluster as of a moment, from the lake's `changes`: a filter, not a replay.

Each znode's last version at or before the moment is what the cluster was then, as capture's
snapshot reads it: the newest change per path (one Spark aggregation over the table) is decoded
again from the znode it kept (`after`; for a znode deleted by then, its last version and the
deletion), and those few records go through the rules engine in seq order. The engine's state
records are then what the state topic held at that moment, so `state show` renders them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from zkcdc.capture.decoders import router
from zkcdc.capture.records import Znode, event_fields
from zkcdc.ground.change_types import Op
from zkcdc.streaming.lake.history_queries import read_table, utc_text
from zkcdc.streaming.lake.lake_tables import LakeError, Table
from zkcdc.streaming.rules.alert_engine import AlertEngine

_ZNODE_FIELDS = ("data", "version", "czxid", "mzxid", "ctime_ms", "mtime_ms", "ephemeral_owner")


def state_at(spark: Any, lake: str, cluster: str, at_ms: int) -> dict[str, dict[str, Any]]:
    """The state records of `cluster` as of `at_ms` (key -> value, as on the state topic)."""
    from pyspark.sql import functions as F

    changes = read_table(spark, lake, Table.CHANGES).where(F.col("cluster") == cluster)
    first = changes.agg(F.min("ts_ms").alias("first")).collect()[0]["first"]
    if first is None:
        raise LakeError(f"the lake holds no changes of cluster {cluster!r}")
    if at_ms < first:
        raise LakeError(
            f"{cluster}'s history in the lake begins at {utc_text(first)}, after {utc_text(at_ms)}"
        )
    day = F.to_date(F.timestamp_millis(F.lit(at_ms)))
    upto = changes.where((F.col("day") <= day) & (F.col("ts_ms") <= at_ms))
    newest = F.max_by(F.struct("seq", "op", "before", "after"), "seq")
    rows = (
        upto.groupBy("path")
        .agg(newest.alias("last"), F.max("ts_ms").alias("ts_ms"))
        .select("path", "ts_ms", "last.*")
    )
    newest_rows = rows.collect()
    engine = AlertEngine(cluster)
    for record in _as_read(newest_rows):
        engine.process(record)
    # The state as the engine holds it after the moment's last record (a heartbeat's, maybe).
    engine.now_ms = max([engine.now_ms, *(row["ts_ms"] for row in newest_rows)])
    return {key: value for key, value in engine.take_state() if value is not None}


def _as_read(rows: list[Any]) -> Iterator[dict[str, Any]]:
    """Each path's newest change as the records a snapshot would give, in seq order: a READ
    of the znode, and for one deleted by then its deletion after it."""
    n = 0
    for row in sorted(rows, key=lambda r: r["seq"]):
        op = row["op"]
        if op == Op.HEARTBEAT.value:
            continue
        deleted = op == Op.DELETE.value
        last = _znode(row["before"] if deleted else row["after"])
        if last is None:
            continue
        steps = [(Op.READ, None, last)] + ([(Op.DELETE, last, None)] if deleted else [])
        for step, before, after in steps:
            n += 1
            events = router.decode(row["path"], before, after)
            yield {
                "seq": n, "ts_ms": row["ts_ms"], "op": step.value, "path": row["path"],
                "events": [event_fields(e) for e in events],
            }  # fmt: skip


def _znode(struct: Any) -> Znode | None:
    if struct is None:
        return None
    values = struct.asDict()
    data = values["data"]
    return Znode(
        data=bytes(data) if data is not None else None,
        **{name: values[name] for name in _ZNODE_FIELDS[1:]},
    )
