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
    bounds = changes.agg(F.min("ts_ms").alias("first")).collect()[0]
    if bounds["first"] is None:
        raise LakeError(f"the lake holds no changes of cluster {cluster!r}")
    if at_ms < bounds["first"]:
        raise LakeError(
            f"{cluster}'s history in the lake begins at {utc_text(bounds['first'])}, after "
            f"{utc_text(at_ms)}"
        )
    znodes = read_table(spark, lake, Table.ZNODES).where(
        (F.col("cluster") == cluster) & (F.col("from_ms") <= at_ms)
    )
    current = F.col("to_ms").isNull() | (F.col("to_ms") > at_ms)
    # A znode deleted by then can leave a trace (a broker not alive, the last controller): its
    # last version and its deletion are put through the engine too.
    gone = F.col("to_op") == Op.DELETE.value
    newest = F.max_by(
        F.struct("from_seq", "from_ms", "to_seq", "to_ms", "to_op", "znode"), "from_seq"
    )
    rows = (
        znodes.where(current | gone)
        .groupBy("path")
        .agg(newest.alias("last"))
        .select("path", "last.*")
        .collect()
    )
    engine = AlertEngine(cluster)
    for record in _as_read(rows, at_ms):
        engine.process(record)
    # The state as the engine holds it after the moment's last record (a heartbeat's, maybe).
    engine.now_ms = max(engine.now_ms, _last_ms(changes, at_ms))
    return {key: value for key, value in engine.take_state() if value is not None}


def _last_ms(changes: Any, at_ms: int) -> int:
    """The time of the last record at or before the moment: its day's first (one folder)."""
    from pyspark.sql import functions as F

    day = F.to_date(F.timestamp_millis(F.lit(at_ms)))
    upto = changes.where(F.col("ts_ms") <= at_ms)
    for where in (F.col("day") == day, F.col("day") < day):
        last = upto.where(where).agg(F.max("ts_ms").alias("last")).collect()[0]["last"]
        if last is not None:
            return int(last)
    return 0


def _as_read(rows: list[Any], at_ms: int) -> Iterator[dict[str, Any]]:
    """Each path's version at the moment as the records a snapshot would give: a READ of the
    znode at its version's seq, and for one deleted by then its deletion at the deletion's
    seq, all in seq order (a topic's deletion after its partitions' states were read)."""
    steps: list[tuple[int, Op, Any, Znode | None, Znode | None]] = []
    for row in rows:
        last = _znode(row["znode"])
        if last is None:
            continue
        steps.append((row["from_seq"], Op.READ, row, None, last))
        if row["to_ms"] is not None and row["to_ms"] <= at_ms and row["to_op"] == Op.DELETE.value:
            steps.append((row["to_seq"], Op.DELETE, row, last, None))
    for n, (_, step, row, before, after) in enumerate(sorted(steps, key=lambda s: s[0]), 1):
        events = router.decode(row["path"], before, after)
        yield {
            "seq": n, "ts_ms": row["to_ms"] if step is Op.DELETE else row["from_ms"],
            "op": step.value, "path": row["path"], "events": [event_fields(e) for e in events],
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
