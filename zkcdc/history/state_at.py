"""The cluster as of a moment, from the lake's `changes`: a filter, not a replay.

Each znode's last version at or before the moment is what the cluster was then, as capture's
snapshot reads it: the newest change per path (one Spark aggregation over the table) is decoded
again from the znode it kept (`after`; for a znode deleted by then, its last version and the
deletion), and those records are folded into a cluster state in seq order, as the rules engine
folds them (no rule is evaluated: a moment's state raises no alert). Its state records are
then what the state topic held at that moment, so `state show` renders them. The versions come
to Python as Arrow batches: a cluster's ~100,000 state znodes as Rows cost seconds of unpickling."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from zkcdc.capture.decoders import router
from zkcdc.capture.records import Znode, event_fields
from zkcdc.ground.change_types import Op
from zkcdc.streaming.lake.history_queries import read_table, utc_text
from zkcdc.streaming.lake.lake_tables import LakeError, Table
from zkcdc.streaming.rules.cluster_state import ClusterState, Entity
from zkcdc.streaming.rules.state_records import upserts

# A cluster has a znode per partition beside its state znode, and the decoders say nothing of it:
# left out in Spark rather than decoded to no event in Python (tests/unit/history).
SILENT_IN_BULK = r"^/brokers/topics/[^/]+/partitions(/[0-9]+)?$"
_ZNODE_FIELDS = ("data", "version", "czxid", "mzxid", "ctime_ms", "mtime_ms", "ephemeral_owner")


def state_at(spark: Any, lake: str, cluster: str, at_ms: int) -> dict[str, dict[str, Any]]:
    """The state records of `cluster` as of `at_ms` (key -> value, as on the state topic)."""
    from pyspark.sql import functions as F

    changes = read_table(spark, lake, Table.CHANGES).where(F.col("cluster") == cluster)
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
        znodes.where((current | gone) & ~F.col("path").rlike(SILENT_IN_BULK))
        .groupBy("path")
        .agg(newest.alias("last"))
        .select("path", "last.*")
        .toArrow()
        .to_pylist()
    )
    if not rows:  # nothing then: is the moment before the cluster's history?
        _check_begun(changes, cluster, at_ms)
    with ThreadPoolExecutor(1) as spark_meanwhile:  # its scan while Python decodes
        last_ms = spark_meanwhile.submit(_last_ms, changes, at_ms)
        state, touched, now_ms = ClusterState(cluster), set[Entity](), 0
        for record in _as_read(rows, at_ms):
            now_ms = max(now_ms, record["ts_ms"])
            for event in record["events"]:
                touched |= state.fold(event)
        # Stamped as the engine stamps them after the moment's last record (a heartbeat's).
        now_ms = max(now_ms, last_ms.result())
    return {key: value for key, value in upserts(state, touched, now_ms) if value is not None}


def _check_begun(changes: Any, cluster: str, at_ms: int) -> None:
    from pyspark.sql import functions as F

    first = changes.agg(F.min("ts_ms").alias("first")).collect()[0]["first"]
    if first is None:
        raise LakeError(f"the lake holds no changes of cluster {cluster!r}")
    if at_ms < first:
        raise LakeError(
            f"{cluster}'s history in the lake begins at {utc_text(first)}, after {utc_text(at_ms)}"
        )


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


def _as_read(rows: list[dict[str, Any]], at_ms: int) -> Iterator[dict[str, Any]]:
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


def _znode(values: dict[str, Any] | None) -> Znode | None:
    if values is None:
        return None
    data = values["data"]
    return Znode(
        data=bytes(data) if data is not None else None,
        **{name: values[name] for name in _ZNODE_FIELDS[1:]},
    )
