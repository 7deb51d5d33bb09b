"""A record over what the topic takes: its images' bytes left out, then its events, each flagged
with what was left out (size and SHA-256), never more than needed."""

from __future__ import annotations

import hashlib
import json

from zkcdc.capture.encoding.avro_codec import load_schema
from zkcdc.capture.encoding.avro_encoder import compile_encoder
from zkcdc.capture.oversize import fitted
from zkcdc.capture.records import ChangeRecord, ClusterEvent, Znode
from zkcdc.ground.change_types import EventType, Op

ENCODE = compile_encoder(load_schema(), sized_arrays=True)


def _record(size: int, events: int = 1) -> dict:
    event = ClusterEvent(type=EventType.CONFIG_CHANGED, config_after={"k" * 50: "v" * 500})
    return ChangeRecord("c", 7, Op.UPDATE, "/config/topics/t", Znode(b"a" * size, 1),
                        Znode(b"b" * size, 2), 9, 1, 1, events=(event,) * events).to_avro()  # fmt: skip


def test_the_images_bytes_are_left_out_with_their_size_and_digest():
    record = _record(50_000)
    value, header = fitted(record, ENCODE, 10_000)
    assert len(value) <= 10_000
    flag = json.loads(header)
    assert flag["before"] == {"size": 50_000, "sha256": hashlib.sha256(b"a" * 50_000).hexdigest()}
    assert flag["after"]["size"] == 50_000 and "events" not in flag
    assert record["after"]["data"] == b"b" * 50_000, "the record itself (logged whole) is untouched"


def test_events_are_left_out_too_only_when_the_images_were_not_enough():
    value, header = fitted(_record(10, events=100), ENCODE, 10_000)
    assert len(value) <= 10_000 and json.loads(header)["events"] == 100
