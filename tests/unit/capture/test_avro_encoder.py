"""The schema-compiled encoder writes exactly fastavro's bytes; its container blocks read back."""

from __future__ import annotations

import io

import fastavro
import pytest

from zkcdc.capture.delivery.event_log import EventLogWriter
from zkcdc.capture.encoding.avro_codec import load_schema
from zkcdc.capture.encoding.avro_encoder import EncoderError, compile_encoder
from zkcdc.capture.records import ChangeRecord, ClusterEvent, PartitionRef, Source, Znode
from zkcdc.ground.change_types import EventType, Op


def records() -> list[ChangeRecord]:
    big = Znode(None, 7, 2**40 + 3, 2**62, 1_700_000_000_000, 1_700_000_000_123, -(2**63))
    events = (
        ClusterEvent(
            type=EventType.LEADER_CHANGED,
            topic="t-é",
            partition=0,
            leader_before=1,
            leader_after=-1,
            isr_before=(1, 2, 3),
            isr_after=(),
            clean=False,
            controller_epoch=2**31 - 1,
        ),
        ClusterEvent(
            type=EventType.REASSIGNMENT_REQUESTED,
            partitions=(PartitionRef("a", 1, (1, 2)), PartitionRef("b", 0, None)),
            assignment={"0": (1, 2), "1": ()},
            topics=("a", "b"),
        ),
        ClusterEvent(
            type=EventType.CONFIG_CHANGED,
            entity_type="topics",
            entity_name="t",
            config_before={},
            config_after={"retention.ms": "1", "ü": ""},
            changed_keys=("retention.ms",),
            subscription={"t": 2},
            offset_before=-5,
            offset_after=2**63 - 1,
        ),
    )
    return [
        ChangeRecord("c1", 1, Op.UPDATE, "/x", big, big, 2**40, 5, 6, 3, Source(), events),
        ChangeRecord("c1", 2, Op.HEARTBEAT, "", None, None, None, 0, 0),
        ChangeRecord(
            "c1",
            3,
            Op.CREATE,
            "/y",
            None,
            Znode(b"\x00\xff" * 100, 0, 1, 1, 0, 0, 0),
            None,
            -1,
            -2,
            0,
            Source("watch", 12345, True),
        ),
    ]


def test_compiled_encoder_writes_the_same_bytes_as_fastavro():
    schema = load_schema()
    encode = compile_encoder(schema)
    for record in records():
        value = record.to_avro()
        expected = io.BytesIO()
        fastavro.schemaless_writer(expected, schema, value)
        assert encode(value) == expected.getvalue(), record.op


def test_longs_of_every_size_and_sign_encode_as_fastavro_does_again_and_again():
    encode = compile_encoder(fastavro.parse_schema("long"))
    edges = [n for k in range(64) for n in (2**k - 1, 2**k, -(2**k), -(2**k) - 1)]
    values = [n for n in edges if -(2**63) <= n < 2**63] + list(range(-300, 300))
    for _ in range(2):  # the second time from the encoder's memory of recent numbers
        for n in values:
            expected = io.BytesIO()
            fastavro.schemaless_writer(expected, "long", n)
            assert encode(n) == expected.getvalue(), n


def test_unions_pick_their_branch_by_python_type_and_refuse_ambiguous_ones():
    encode = compile_encoder(fastavro.parse_schema(["null", "string", "long", "boolean"]))
    assert encode("a") == b"\x02\x02a"
    assert encode(3) == b"\x04\x06"
    assert encode(True) == b"\x06\x01"
    with pytest.raises(EncoderError, match="fits no branch"):
        encode(1.5)
    with pytest.raises(EncoderError, match="ambiguous"):
        compile_encoder(
            fastavro.parse_schema(["string", {"type": "enum", "name": "E", "symbols": ["A"]}])
        )


def test_hand_written_container_blocks_read_back_with_a_plain_fastavro_reader(tmp_path):
    writer = EventLogWriter(tmp_path, "c1", now=lambda: 0.0)
    writer.append([r.to_avro() for r in records()[:2]])
    writer.append([records()[2].to_avro()])
    writer.close()
    (file,) = tmp_path.iterdir()
    with file.open("rb") as stream:
        read = list(fastavro.reader(stream))
    assert read == [r.to_avro() for r in records()]
