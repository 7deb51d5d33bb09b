"""The alert job's stateful step spread over Spark tasks: one group per (cluster, shard)
(streaming/rules/engine_scope.py), run by `transformWithStateInPandas`.

Each record goes to every shard of its cluster: whole where the shard needs it, as a tick (no
events) elsewhere, routed in Spark SQL (no Python UDF). A shard keeps its engine in a small
value and its partitions and topics in buckets of two MapStates, so a micro-batch reads and
writes only the buckets its records touch. Its alerts carry their place in the single engine's
order (`place`), by which the driver merges the shards'.

pyspark and pandas are imported inside the functions that run on Spark (see alert_job.py)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator
from typing import Any

from zkcdc.ground.gc_pause import gc_paused
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_job import (
    add_rows,
    dead_letter_rows,
    drain_ordered,
    order_row,
    output_rows,
)
from zkcdc.streaming.job.bucketed_map import BucketedMap, Buckets
from zkcdc.streaming.job.change_source import ROUTING_EVENTS, ROUTING_EVENTS_TYPE
from zkcdc.streaming.job.python_worker import ready_for_next_tasks
from zkcdc.streaming.job.saved_state import engine_blob, read_engine, read_partitions, read_topics
from zkcdc.streaming.rules import engine_record
from zkcdc.streaming.rules.alert_engine import AlertEngine, Order
from zkcdc.streaming.rules.alert_records import Alert
from zkcdc.streaming.rules.engine_scope import ISR_CHANGES, SHARE, Scope, hash_space
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import OrderReport, SeqOrder
from zkcdc.streaming.rules.state_records import StateUpsert

SHARDED_OUTPUT_SCHEMA = (
    "kind string, key string, json string, status string, at_ms long, place string"
)
# The kinds of a shard's state entries: (kind, n) -> bytes.
META, CORE, PARTITIONS, TOPICS = 0, 1, 2, 3  # META 0: the number of CORE pieces

_STATE_PATH = r"^/brokers/topics/([^/]+)/partitions/([0-9]{1,9})/state\z"
_CLUSTER_ONLY = r"^/(brokers/ids|consumers|admin/delete_topics)/"


def place_text(order: Order) -> str:
    """An alert's place as text that sorts as the place does (Spark and Python alike): numbers
    zero-padded, strings as they are, parts joined by NUL (below every character of a name)."""
    parts = [f"{part:020d}" if isinstance(part, int) else str(part) for part in order]
    return "\x00".join(parts)


_SLOT_TRIES = 16  # each costs a hash a row; 2 tasks: 1 in 65,536 rows falls back to its shard


def routed(records: Any, partition_shards: int) -> Any:
    """Each record once per shard of its cluster, with its events where that shard needs them
    whole (engine_scope.full_shards, in SQL), as leader moves where the cluster shard needs only
    those (engine_scope.leader_moves: ISR changes), and null elsewhere. `slot`: the shard's
    group key, chosen so that Spark's hash partitioning over `partition_shards` tasks gives
    shard k task k mod `partition_shards` (the cluster shard shares task 0).

    What a record needs is worked out once, before it is copied to every shard; after the copy
    only comparisons of small columns remain. Path and events are read in a projection of their
    own, so each is parsed once a record, and no higher-order function (`forall`, `transform`)
    is used: one keeps Spark from compiling its whole projection, which then ran interpreted
    with the events parsed three times, as much time as the Kafka read and the Avro decode
    together (B3's records)."""
    from pyspark.sql import functions as F

    columns = ("cluster", "seq", "partition", "ts_ms", "op", "path", "events")
    # Three projections, which Spark keeps apart (each column below is used more than once in
    # the next): the path matched once, in compiled code; the events' fields taken once, from
    # the source's typed events (change_source.ROUTING_EVENTS) or, where it has none, parsed
    # from their JSON in Spark's interpreter (`from_json` is not compiled); the rest compiled.
    matched = records.select(
        *columns,
        ROUTING_EVENTS,
        F.regexp_extract("path", _STATE_PATH, 1).alias("_topic"),
        F.regexp_extract("path", _STATE_PATH, 2).alias("_number"),
    )
    topic = F.col("_topic")
    # Records of a partition's state are most of a busy cluster's: only those can be moves
    # (events naming one of the types a move is made of).
    named = [F.col("events").contains(kind.value) for kind in sorted(ISR_CHANGES)]
    candidate = (topic != "") & functools.reduce(operator.or_, named)
    # Null typed events: a source of JSON alone (change_source.ROUTING_EVENTS).
    parse = F.coalesce(F.col(ROUTING_EVENTS), F.from_json("events", ROUTING_EVENTS_TYPE))
    read = matched.select(*columns, "_topic", "_number", F.when(candidate, parse).alias("_parsed"))
    parsed = F.col("_parsed")
    partition = F.col("_number").cast("int").cast("string")
    part = F.pmod(
        F.crc32(F.concat(topic, F.lit("/"), partition)), F.lit(hash_space(partition_shards))
    )
    own = F.when(
        topic != "",
        F.lit(1) + F.least((part / F.lit(SHARE)).cast("int"), F.lit(partition_shards - 1)),
    ).when(F.col("path").rlike(_CLUSTER_ONLY), F.lit(0))
    isr_types = F.array(*[F.lit(kind.value) for kind in sorted(ISR_CHANGES)])
    isr_only = (
        (F.size(parsed) > 0)
        & (F.size(F.array_except(parsed["type"], isr_types)) == 0)
        & _no_nulls(parsed["topic"])
        & _no_nulls(parsed["partition"].cast("array<string>"))
    )
    # engine_scope.leaders_of reads them: "a", the leader after, wins over "l" where present.
    moves = F.to_json(
        F.arrays_zip(
            parsed["topic"].alias("t"),
            parsed["partition"].alias("p"),
            parsed["leader_after"].alias("a"),
            parsed["leader"].alias("l"),
        )
    )
    shard, own_col = F.col("shard"), F.col("own")
    # own: the one partition shard that needs the record whole besides the cluster shard, 0
    # when only the cluster shard needs it, null when every shard does.
    whole = own_col.isNull() | (shard == 0) | (shard == own_col)
    lead = (shard == 0) & F.col("moves").isNotNull()
    return (
        read.select(
            *columns,
            own.alias("own"),
            F.when(F.coalesce(isr_only, F.lit(False)), moves).alias("moves"),
        )
        .withColumn("shard", F.explode(F.sequence(F.lit(0), F.lit(partition_shards))))
        # A dead letter (cluster null) once, not once per shard.
        .where(F.col("cluster").isNotNull() | (F.col("shard") == 0))
        .select(
            "cluster",
            slot_of(F.col("cluster"), shard, partition_shards).alias("slot"),
            "seq",
            "partition",
            "ts_ms",
            # A tick carries seq and time only: its path and op are of no use to the shard.
            F.when(lead, F.lit("LEAD"))
            .when(whole, F.col("op"))
            .otherwise(F.lit("TICK"))
            .alias("op"),
            F.when(whole, F.col("path")).alias("path"),
            F.when(lead, F.col("moves")).when(whole, F.col("events")).alias("events"),
        )
    )


def _no_nulls(texts: Any) -> Any:
    """Whether an array of strings holds no null: `array_join` leaves nulls out unless given
    a replacement (no higher-order function, see routed)."""
    from pyspark.sql import functions as F

    return F.array_join(texts, ",") == F.array_join(texts, ",", "?")


def slot_of(cluster: Any, shard: Any, partition_shards: int) -> Any:
    """The first of shard, shard + n + 1, shard + 2(n + 1), ... that Spark's hash partitioning
    (murmur3 of the grouping columns, seed 42, as SQL's `hash`) puts in task shard mod n:
    unrolled, so that generated code stops at the first hit (a lambda would not be compiled)."""
    from pyspark.sql import functions as F

    if partition_shards <= 1:
        return shard
    task = F.pmod(shard, F.lit(partition_shards))
    candidates = [shard + F.lit((partition_shards + 1) * i) for i in range(_SLOT_TRIES)]
    hits = [
        F.when(F.pmod(F.hash(cluster, c), F.lit(partition_shards)) == task, c) for c in candidates
    ]
    return F.coalesce(*hits, shard)


def _processor_class() -> Any:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class AlertShard(StatefulProcessor):
        def __init__(
            self,
            settings: RuleSettings,
            partitions: int,
            with_state: bool,
            partition_shards: int,
            buckets: Buckets,
        ) -> None:
            self.settings = settings
            # Read where the processor is made, on the driver: a worker may not see avro/.
            self.schemas = engine_record.versions()
            self.partitions = partitions
            self.with_state = with_state
            self.partition_shards = partition_shards
            self.buckets = buckets

        def init(self, handle: Any) -> None:
            from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

            # One state variable: each costs ~40 ms a micro-batch and task however little it
            # holds (its column family's commit), so the engine's pieces share one MapState.
            engine_record.use(self.schemas)
            key = StructType([StructField("kind", IntegerType()), StructField("n", IntegerType())])
            blob = StructType([StructField("blob", BinaryType())])
            self.store = handle.getMapState("shard", key, blob)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            import pandas as pd  # type: ignore[import-untyped]

            ready_for_next_tasks()
            if key[0] is None:  # the dead letters, routed to one slot alone
                letters = dead_letter_rows(rows)
                yield pd.DataFrame({**letters, "place": [None] * len(letters["key"])}, dtype=object)
                return
            with gc_paused():
                shard = int(key[1]) % (self.partition_shards + 1)  # routed(): the slot
                yield self._run(str(key[0]), shard, rows)

        def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
            """The shard's entries from a backlog taken whole (initial_state.py), in the
            query's first micro-batch, before its rows."""
            ready_for_next_tasks()
            for entry, n, blob in zip(
                initialState["entry"].tolist(), initialState["n"].tolist(),
                initialState["blob"].tolist(), strict=True,
            ):  # fmt: skip
                _put(self.store, int(entry), int(n), bytes(blob))

        def _run(self, cluster: str, shard: int, rows: Iterator[Any]) -> Any:
            import pandas as pd

            engine: AlertEngine
            order: SeqOrder
            store = self.store
            stored = _read_core(store)
            if stored is not None:
                engine, order = read_engine(stored, self.settings, self.partitions)
            else:
                scope = Scope(shard, self.partition_shards)
                engine = AlertEngine(cluster, self.settings, scope=scope)
                order = SeqOrder(self.partitions)
            partitions, topics = _bucketed_maps(store, shard, self.partition_shards, self.buckets)
            engine.state.partitions = partitions  # type: ignore[assignment]
            engine.state.topics = topics  # type: ignore[assignment]
            add_rows(order, engine.last_seq, rows)
            placed = drain_ordered(engine, order)
            states = engine.take_state() if self.with_state else engine.forget_changes()
            _save(store, engine, order, partitions, topics)
            report = order.take_report()
            # Every shard sees the same records: one reports for them all.
            out = placed_rows(cluster, placed, states, report if shard == 0 else None)
            return pd.DataFrame(out, dtype=object)

        def close(self) -> None:
            pass

    return AlertShard


def placed_rows(
    cluster: str,
    placed: list[tuple[Order, Alert]],
    states: list[StateUpsert],
    report: OrderReport | None,
) -> dict[str, list[Any]]:
    """A turn's output rows (SHARDED_OUTPUT_SCHEMA): its alerts with their places, its state
    upserts, and with `report` its placing figures."""
    out = output_rows([alert for _, alert in placed], states)
    out["place"] = [place_text(at) for at, _ in placed] + [None] * len(states)
    if report is not None:
        for column, values in order_row(cluster, report).items():
            out[column] += values
        out["place"].append(None)
    return out


class MemoryMapState:
    """A MapState in memory, as `stored_entries` fills one (and tests stand in for Spark's)."""

    def __init__(self) -> None:
        self.values: dict[Any, tuple[bytes]] = {}

    def getValue(self, key: Any) -> Any:
        return self.values.get(key)

    def updateValue(self, key: Any, value: Any) -> None:
        self.values[key] = value

    def removeKey(self, key: Any) -> None:
        self.values.pop(key, None)


def _bucketed_maps(
    store: Any, shard: int, partition_shards: int, buckets: Buckets
) -> tuple[BucketedMap, BucketedMap]:
    """A shard's partitions and topics over the buckets of its MapState, as its checkpoint's
    layout places them."""
    spread = hash_space(partition_shards) if shard else 1
    partitions = BucketedMap(
        lambda b: _get(store, PARTITIONS, b), buckets.count, read_partitions,
        engine_record.encode_partitions, spread, buckets.layout,
    )  # fmt: skip
    topics = BucketedMap(lambda b: _get(store, TOPICS, b), buckets.count, read_topics,
                         engine_record.encode_topics)  # fmt: skip
    return partitions, topics


def _save(
    store: Any, engine: AlertEngine, order: SeqOrder, partitions: BucketedMap,
    topics: BucketedMap,
) -> None:  # fmt: skip
    """What a turn leaves in the MapState: the buckets that changed, then the engine's value
    without its partitions and topics (they are in the buckets)."""
    partitions.flush(lambda b, blob: _put(store, PARTITIONS, b, blob))
    topics.flush(lambda b, blob: _put(store, TOPICS, b, blob))
    engine.state.partitions, engine.state.topics = {}, {}
    _write_core(store, engine_blob(engine, order))


def stored_entries(
    engine: AlertEngine, order: SeqOrder, partition_shards: int, buckets: Buckets
) -> list[tuple[int, int, bytes]]:
    """A shard's engine and order (engine_split.split gives them) as the (kind, n, bytes)
    entries of its MapState, as `_run` leaves them at the end of a micro-batch: its
    partitions and topics in their buckets, the rest in the engine's value."""
    scope = engine.scope
    if scope is None:
        raise StreamingError("only a shard's engine is stored in the sharded layout")
    store = MemoryMapState()
    partitions, topics = _bucketed_maps(store, scope.shard, partition_shards, buckets)
    partitions.update(engine.state.partitions)
    topics.update(engine.state.topics)
    held = engine.state.partitions, engine.state.topics
    try:
        _save(store, engine, order, partitions, topics)
    finally:
        engine.state.partitions, engine.state.topics = held
    return [(kind, n, blob) for (kind, n), (blob,) in store.values.items()]


def _read_core(store: Any) -> bytes | None:
    """The engine's value, joined from its pieces: one since PySpark 4.0.2, many in checkpoints
    written under 4.0.0 (whose state server could read a large message only in part,
    SPARK-53870), which resume as they are."""
    count = _get(store, META, 0)
    if count is None:
        return None
    return b"".join(_get(store, CORE, n) or b"" for n in range(int(count)))


def _write_core(store: Any, blob: bytes) -> None:
    """The engine's value as one piece; the pieces an older checkpoint kept beyond it go."""
    old = _get(store, META, 0)
    _put(store, CORE, 0, blob)
    for n in range(1, int(old or 0)):
        _put(store, CORE, n, None)
    _put(store, META, 0, b"1")


def _get(store: Any, kind: int, n: int) -> bytes | None:
    value = store.getValue((kind, n))
    return None if value is None else bytes(value[0])


def _put(store: Any, kind: int, n: int, blob: bytes | None) -> None:
    if blob is None:
        store.removeKey((kind, n))
    else:
        store.updateValue((kind, n), (blob,))


def sharded_alerts_stream(
    records: Any,
    settings: RuleSettings,
    partitions: int,
    with_state: bool,
    partition_shards: int,
    buckets: Buckets,
    initial: Any = None,
) -> Any:
    """`buckets`: the checkpoint's (checkpoint_layout.recorded_buckets); `initial`: the
    shards' entries grouped by (cluster, slot), taken by the first micro-batch
    (initial_state.py)."""
    processor = _processor_class()(settings, partitions, with_state, partition_shards, buckets)
    return (
        routed(records, partition_shards)
        .groupBy("cluster", "slot")
        .transformWithStateInPandas(
            processor, SHARDED_OUTPUT_SCHEMA, "Append", "None", initialState=initial
        )
    )
