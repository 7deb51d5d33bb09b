"""A change record written with avro/ChangeRecord.avsc reads back equal with a plain fastavro reader."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro

from zkcdc.capture.decoders import partition_state
from zkcdc.capture.records import ChangeRecord, Source, Znode
from zkcdc.ground.change_types import EventType, Op

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "avro" / "ChangeRecord.avsc"


def test_a_record_with_events_round_trips_through_the_schema_file():
    schema = fastavro.parse_schema(json.loads(SCHEMA_FILE.read_text()))
    before = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    after = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,3]}'
    record = ChangeRecord(
        cluster="c1",
        seq=7,
        op=Op.UPDATE,
        path="/brokers/topics/t/partitions/0/state",
        before=Znode(before, 0, 10, 10, 1000, 1000, 0),
        after=Znode(after, 1, 10, 12, 1000, 2000, 0),
        zxid=12,
        ts_ms=2000,
        captured_ms=2003,
        source=Source("watch", 0x1234, False),
        events=tuple(partition_state.decode("t", 0, before, after)),
    )
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record.to_avro())
    buffer.seek(0)
    read = fastavro.schemaless_reader(buffer, schema, schema)
    assert read["op"] == "UPDATE"
    assert read["after"]["data"] == after
    (event,) = read["events"]
    assert event["type"] == EventType.ISR_SHRUNK
    assert (event["isr_before"], event["isr_after"], event["removed"]) == ([1, 2, 3], [1, 3], [2])
    assert event["group"] is None
    assert read == record.to_avro()


def test_a_cluster_event_is_built_checked_and_frozen_like_any_dataclass():
    import dataclasses

    import pytest

    from zkcdc.capture.records import ClusterEvent
    from zkcdc.ground.change_types import EventType

    event = ClusterEvent(type=EventType.ISR_SHRUNK, topic="t", partition=1, isr_after=(1,))
    assert event.reason is None and event.isr_after == (1,)
    assert list(vars(event)) == [f.name for f in dataclasses.fields(ClusterEvent)]
    assert dataclasses.replace(event, partition=2) == ClusterEvent(
        type=EventType.ISR_SHRUNK, topic="t", partition=2, isr_after=(1,)
    )
    assert hash(event) == hash(dataclasses.replace(event))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.topic = "u"
    with pytest.raises(TypeError, match="unknown fields \\['partitoin'\\]"):
        ClusterEvent(type=EventType.ISR_SHRUNK, partitoin=1)
    with pytest.raises(TypeError, match="missing \\['type'\\]"):
        ClusterEvent(topic="t")
