"""The alert job's routing in Spark SQL (`shard_stage.routed`) against its reference in Python
(`sharded_alerts.shard_record`): every record reaches every shard of its cluster, whole where
the reference sends it whole, as the same leader moves where it sends those, and as a tick
elsewhere. Records as the job's source gives them: events as the JSON that Spark's `to_json`
writes of Avro-decoded events (a field of the right type, or left out when null), including
what a hostile or broken producer could make of them; with the events' fields typed beside
(what the Avro decode gives the routing) or without (a schema registry's values)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.job.change_source import ROUTING_EVENTS, ROUTING_EVENTS_TYPE, ROUTING_FIELDS
from zkcdc.streaming.job.shard_stage import routed
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.rules.engine_scope import leaders_of
from zkcdc.streaming.rules.sharded_alerts import shard_record

pytestmark = pytest.mark.integration

_PATHS = st.sampled_from([
    "/brokers/topics/orders/partitions/{p}/state", "/brokers/topics/t-{p}/partitions/0/state",
    "/brokers/topics/orders/partitions/{p}", "/brokers/topics/orders", "/brokers/ids/{p}",
    "/consumers/g/offsets/orders/{p}", "/admin/delete_topics/orders", "/controller", "",
    "/brokers/topics/orders/partitions/{p}/state/extra", "/brokers/topics//partitions/1/state",
])  # fmt: skip
_TYPES = st.sampled_from([
    EventType.ISR_SHRUNK, EventType.ISR_EXPANDED, EventType.LEADER_EPOCH_BUMPED,
    EventType.PARTITION_STATE_REWRITTEN, EventType.LEADER_CHANGED, EventType.BROKER_REGISTERED,
])  # fmt: skip
_INTS = st.integers(-1, 5)


@st.composite
def events(draw: Any) -> Any:
    """An event list as the job sees it, or (rarely) what is no list of events at all."""
    odd = draw(st.integers(0, 20))
    if odd == 0:
        return draw(st.sampled_from(["[null]", "ISR_ not json", "{}", "[]"]))
    out = []
    for _ in range(draw(st.integers(1, 3))):
        event: dict[str, Any] = {"type": draw(_TYPES)}
        for name, values in (("topic", st.sampled_from(["orders", "t-1", "ISR_x"])),
                             ("partition", _INTS), ("leader", _INTS), ("leader_after", _INTS)):  # fmt: skip
            if draw(st.integers(0, 5)):  # a field Avro decoded as null is left out
                event[name] = draw(values)
        out.append(event)
    return out


@st.composite
def records(draw: Any) -> list[dict[str, Any]]:
    """Many records an example: each example is a Spark job (~1 s)."""
    out = []
    for seq in range(draw(st.integers(1, 400))):
        path = draw(_PATHS).format(p=draw(st.integers(0, 40)))
        out.append({"cluster": "c", "seq": seq, "partition": 0, "ts_ms": 1_000 + seq,
                    "op": draw(st.sampled_from(["READ", "UPDATE", "CREATE"])), "path": path,
                    "events": draw(events())})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def spark() -> Any:
    spark = session("local[1]", "zkcdc-routing-tests")
    yield spark
    spark.stop()


def _text(events: Any) -> str:
    return events if isinstance(events, str) else orjson.dumps(events).decode()


def _typed(events: Any, typed: bool) -> list[tuple[Any, ...]] | None:
    """The events' fields the routing reads, as the source's decode gives them beside the JSON
    (a field left out of the JSON is null); none for what the JSON alone carries (no list)."""
    if not typed or not isinstance(events, list):
        return None
    return [tuple(event.get(name) for name in ROUTING_FIELDS) for event in events]


# No shrinking: a Spark job an attempt made it take minutes; the assertions name the record.
@settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(records(), st.integers(1, 3), st.booleans())
def test_each_record_reaches_every_shard_as_the_python_reference_routes_it(
    spark: Any, batch: list[dict[str, Any]], partition_shards: int, typed: bool
) -> None:
    """`typed`: the records come with their events' fields typed, as the source decodes them
    (change_source.ROUTING_EVENTS), or as JSON alone, the typed fields null (a schema
    registry's values)."""
    rows = [(r["cluster"], r["seq"], r["partition"], r["ts_ms"], r["op"], r["path"],
             _text(r["events"]), _typed(r["events"], typed)) for r in batch]  # fmt: skip
    frame = spark.createDataFrame(
        rows, "cluster string, seq long, partition int, ts_ms long, op string, path string, "
        f"events string, {ROUTING_EVENTS} {ROUTING_EVENTS_TYPE}",
    )  # fmt: skip
    got = {(row.seq, row.slot % (partition_shards + 1)): row
           for row in routed(frame, partition_shards).collect()}  # fmt: skip
    assert len(got) == len(batch) * (partition_shards + 1), "one row a record and shard"
    for record in batch:
        listed = record["events"] if isinstance(record["events"], list) else None
        whole = {**record, "events": listed}
        for shard in range(partition_shards + 1):
            row = got[(record["seq"], shard)]
            want = shard_record(whole, shard, partition_shards)
            assert row.op == (record["op"] if want is whole else want["op"]), (record, shard)
            if want["op"] == "LEAD":
                assert leaders_of(row.events) == want["events"], (record, shard)
            elif want["op"] == "TICK":
                assert row.events is None and row.path is None
            else:
                assert row.events == _text(record["events"]) and row.path == record["path"]


_OPTIONAL = st.one_of(st.none(), st.integers(-1, 5))


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(st.lists(st.tuples(_TYPES, st.sampled_from([None, "orders", "t-1"]), _OPTIONAL,
                                   _OPTIONAL, _OPTIONAL), max_size=3), min_size=1, max_size=40))  # fmt: skip
def test_the_typed_events_the_source_decodes_are_the_fields_of_the_events_json(
    spark: Any, records: list[list[tuple[Any, ...]]]
) -> None:
    """What the routing reads from the source's typed events (change_source.ROUTING_EVENTS) is
    what it would parse from the events' JSON: the records encoded by capture's codec, decoded
    as the source decodes them."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from zkcdc.capture.encoding.avro_codec import HEADER_BYTES, SingleObjectCodec
    from zkcdc.capture.records import ChangeRecord, ClusterEvent, Znode
    from zkcdc.ground.change_types import Op
    from zkcdc.streaming.job.change_source import _columns, schema_json

    codec = SingleObjectCodec()
    values = []
    for seq, events in enumerate(records):
        made = tuple(
            ClusterEvent(
                type=kind, topic=topic, partition=partition, leader=leader, leader_after=after
            )
            for kind, topic, partition, leader, after in events
        )
        record = ChangeRecord("c", seq, Op.UPDATE, "/p", None, Znode(b"{}"), None, 1, 1,
                              events=made)  # fmt: skip
        values.append((codec.encode(record.to_avro())[HEADER_BYTES:],))
    body = spark.createDataFrame(values, "body binary")
    decoded = body.select(from_avro("body", schema_json()).alias("r"))
    for row in decoded.select(*_columns(F.col("r"), F.lit(0))).collect():
        parsed = [tuple(event.get(name) for name in ROUTING_FIELDS)
                  for event in orjson.loads(row.events)]  # fmt: skip
        assert [tuple(event) for event in row[ROUTING_EVENTS]] == parsed, row
