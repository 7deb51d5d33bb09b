"""The alert job's saved state as data (streaming/rules/engine_record.py): an engine and its
order written and read back at any record go on exactly as if never stopped, in every shard
layout; what cannot be read is refused in one line."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.rules import engine_record
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_scope import Scope
from zkcdc.streaming.rules.seq_order import SeqOrder
from zkcdc.streaming.rules.sharded_alerts import shard_record

from .test_sharded_engine import QUICK, record_streams


def _engines(partition_shards: int) -> list[AlertEngine]:
    if not partition_shards:
        return [AlertEngine("c", QUICK)]
    return [AlertEngine("c", QUICK, scope=Scope(s, partition_shards))
            for s in range(partition_shards + 1)]  # fmt: skip


def _feed(engine: AlertEngine, records: list[dict[str, Any]], shards: int) -> list[Any]:
    out: list[Any] = []
    shard = 0 if engine.scope is None else engine.scope.shard
    for record in records:
        r = shard_record(record, shard, shards) if shards else record
        if r["op"] == "LEAD":
            out += engine.process_leaders(r["seq"], r["ts_ms"], r["events"])
        else:
            out += engine.process_ordered(r)
        out.append(("state", sorted(map(repr, engine.take_state()))))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.sampled_from([0, 0, 1, 3]), st.data())
def test_an_engine_written_and_read_back_goes_on_as_if_never_stopped(
    records: list[dict[str, Any]], shards: int, data: Any
) -> None:
    cut = data.draw(st.integers(0, len(records)), label="cut")
    for whole, resumed in zip(_engines(shards), _engines(shards), strict=True):
        expected = _feed(whole, records, shards)
        before = _feed(resumed, records[:cut], shards)
        order = SeqOrder(3)
        order.add(10**9, 1, (5, "UPDATE", "/p", "[]"), resumed.last_seq)
        blob = engine_record.encode(resumed, order)
        back, back_order = engine_record.decode(blob, QUICK)
        assert engine_record.encode(back, back_order) == blob
        assert back_order.pending == order.pending and back_order.heads == order.heads
        assert before + _feed(back, records[cut:], shards) == expected


def test_what_is_not_an_engine_state_record_is_refused_in_one_line() -> None:
    engine, order = AlertEngine("c", QUICK), SeqOrder()
    blob = engine_record.encode(engine, order)
    with pytest.raises(engine_record.UnreadableState, match="not an engine state record"):
        engine_record.decode(pickle.dumps((engine, order)), QUICK)
    newer = blob[:4] + bytes([engine_record.version() + 1]) + blob[5:]
    with pytest.raises(engine_record.UnreadableState, match="reads up to version"):
        engine_record.decode(newer, QUICK)
    with pytest.raises(engine_record.UnreadableState, match="damaged"):
        engine_record.decode(blob[:-3], QUICK)


def test_without_a_state_topic_the_saved_state_does_not_grow_with_the_entities_touched() -> None:
    """`--no-state`: the entities changed are forgotten each micro-batch, not kept (and saved)
    for a state topic that never gets them."""
    engine = AlertEngine("c", QUICK)
    for seq in range(1, 200):
        event = {"type": EventType.PARTITION_STATE_CREATED, "topic": "t", "partition": seq, "leader": 1,
                 "isr": [1], "leader_epoch": 0, "controller_epoch": 1}  # fmt: skip
        engine.process({"seq": seq, "ts_ms": seq, "op": "CREATE", "path": "/p", "events": [event]})
        assert engine.forget_changes() == []
    small = engine_record.encode(engine, SeqOrder())
    assert not engine.changed
    assert engine_record.decode(small, QUICK)[0].changed == set()
