"""The single engine, run over the first records and then cut into shards (engine_split.py),
goes on as the single engine does: the same alerts in the same order and the same state, for
any records (hypothesis), any number of shards, any place of the cut, records still waiting
for their turn at the cut and all."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.rules import engine_record
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_scope import CLUSTER_SHARD, Scope, leaders_text, partition_shard
from zkcdc.streaming.rules.engine_split import NotASingleEngine, key_shard, routed, split
from zkcdc.streaming.rules.seq_order import SeqOrder
from zkcdc.streaming.rules.sharded_alerts import merged, shard_record

from .test_sharded_engine import QUICK, record_streams

SOURCE_PARTITIONS = 2
BATCH = 5


def _source_partition(record: dict[str, Any]) -> int:
    """Where capture would put it: by path (a heartbeat to each partition in turn)."""
    return sum(map(ord, record["path"] or str(record["seq"]))) % SOURCE_PARTITIONS


def _waiting(record: dict[str, Any]) -> tuple[int, str, str, str]:
    return (record["ts_ms"], record["op"], record["path"] or "",
            orjson.dumps(record["events"]).decode())  # fmt: skip


def _shard_waiting(record: dict[str, Any], shard: int, n: int) -> tuple[int, str, str, str]:
    """The record as the job's routing gives it to one shard (shard_stage.routed: the cluster
    shard's leader moves keep their path)."""
    r = shard_record(record, shard, n)
    if r["op"] == "LEAD":
        return (r["ts_ms"], "LEAD", record["path"], leaders_text(r["events"]))
    return (r["ts_ms"], r["op"], r["path"] or "", orjson.dumps(r["events"]).decode())


def _batches(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Micro-batches in which one source partition runs behind the other, so records wait in
    the order across a cut: a batch holds partition 0's next records and partition 1's of the
    batch before."""
    by = [[r for r in records if _source_partition(r) == p] for p in range(SOURCE_PARTITIONS)]
    out = []
    for start in range(0, max(len(by[0]), len(by[1]) + BATCH), BATCH):
        behind = max(0, start - BATCH)
        out.append(by[0][start : start + BATCH] + by[1][behind : behind + BATCH])
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.integers(1, 5), st.data())
def test_a_split_engine_goes_on_as_the_single_engine_does(
    records: list[dict[str, Any]], n: int, data: st.DataObject
) -> None:
    batches = _batches(records)
    cut = data.draw(st.integers(0, len(batches)), label="cut")
    single, order = AlertEngine("c", QUICK), SeqOrder(SOURCE_PARTITIONS)
    # What the shards hold having seen the same records themselves, as the job runs them.
    reference = [(AlertEngine("c", QUICK, scope=Scope(shard, n)), SeqOrder(SOURCE_PARTITIONS))
                 for shard in range(n + 1)]  # fmt: skip
    for batch in batches[:cut]:
        for r in batch:
            order.add(r["seq"], _source_partition(r), _waiting(r), single.last_seq)
        drain_ordered(single, order)
        _run(reference, batch, n)
    shards = split(single, order, n)
    for shard, (engine, shard_order) in enumerate(shards):
        assert _held(engine, shard_order, shard) == _held(*reference[shard], shard)
    # Some of the shards alone (the take cuts the partition shards in a process of their own).
    first = data.draw(st.integers(0, n), label="first")
    for shard, (engine, shard_order) in enumerate(split(single, order, n, range(first, n + 1)),
                                                  first):  # fmt: skip
        assert _held(engine, shard_order, shard) == _held(*reference[shard], shard)
    expected: list[Any] = []
    placed: list[Any] = []
    for batch in batches[cut:]:
        for r in batch:
            order.add(r["seq"], _source_partition(r), _waiting(r), single.last_seq)
        expected += [alert for _, alert in drain_ordered(single, order)]
        placed += _run(shards, batch, n)
    assert [alert for _, alert in merged(placed)] == expected
    assert sorted(u for engine, _ in shards for u in engine.take_state()) == sorted(
        single.take_state()
    )
    assert all(shard_order.pending.keys() == order.pending.keys() for _, shard_order in shards)


def _run(
    shards: list[tuple[AlertEngine, SeqOrder]], batch: list[dict[str, Any]], n: int
) -> list[Any]:
    placed: list[Any] = []
    for shard, (engine, order) in enumerate(shards):
        for r in batch:
            order.add(r["seq"], _source_partition(r), _shard_waiting(r, shard, n), engine.last_seq)
        placed += drain_ordered(engine, order)
    return placed


def _held(engine: AlertEngine, order: SeqOrder, shard: int) -> Any:
    """A shard's engine and order as its saved state says them, every list as a set (what
    comes first in them follows the order entries were made in, which a split does not keep),
    a queue left empty or a count of 0 as none. Of the cluster shard's partitions only what it keeps up to date
    counts: their replicas and leader (engine_split.py)."""
    data = engine_record._engine_data(engine, order)
    data["window_expiries"] = [e for e in data["window_expiries"] if e["due"]]
    for counts in ("preferred", "not_led"):
        data["state"][counts] = [c for c in data["state"][counts] if c["count"]]
    if shard == CLUSTER_SHARD:
        for p in data["state"]["partitions"]:
            del p["isr"], p["leader_epoch"], p["controller_epoch"]
    return _as_sets(data)


def _as_sets(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _as_sets(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted(
            (_as_sets(v) for v in value), key=lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
        )
    return value


def test_the_cut_happens_with_records_waiting_and_conditions_held() -> None:
    """The property above cuts where the generated records leave something to carry: here,
    one case by hand that holds each kind at the cut."""
    single, order = AlertEngine("c", QUICK), SeqOrder(SOURCE_PARTITIONS)
    state = "/brokers/topics/t/partitions/{}/state"
    assignment = {str(p): [1, 2] for p in range(8)}
    made = [("/brokers/topics/t", [{"type": EventType.TOPIC_CREATED, "topic": "t",
                                    "assignment": assignment}])]  # fmt: skip
    for p in range(8):  # the odd ones offline, the even ones under-replicated
        created = {"type": EventType.PARTITION_STATE_CREATED, "topic": "t", "partition": p,
                   "leader": -1 if p % 2 else 1, "isr": [1], "leader_epoch": 1,
                   "controller_epoch": 1}  # fmt: skip
        made.append((state.format(p), [created]))
    made.append(("/brokers/ids/1", [{"type": EventType.BROKER_REGISTERED, "broker_id": 1}]))
    for seq, (path, events) in enumerate(made, start=1):
        record = {"seq": seq, "ts_ms": 1_000 + seq, "op": "READ", "path": path, "events": events}
        order.add(seq, 0, _waiting(record), single.last_seq)
    order.add(len(made), 1, _waiting({**record, "seq": len(made)}), single.last_seq)
    drain_ordered(single, order)
    late = {"seq": len(made) + 2, "ts_ms": 5_000, "op": "UPDATE", "path": state.format(3),
            "events": [{"type": EventType.ISR_EXPANDED, "topic": "t", "partition": 3,
                        "isr_before": [1], "isr_after": [1, 2]}]}  # fmt: skip
    order.add(late["seq"], 0, _waiting(late), single.last_seq)  # waits for seq 11
    drain_ordered(single, order)
    assert list(order.pending) == [late["seq"]]
    held = {key for key in single.tracker.conditions}
    assert ("offline_partition", "t/1") in held and ("under_replicated", "t/0") in held
    # What no generated record leaves: a KRaft controller's epoch, a gap passed.
    single.state.kraft_controller_epoch, order.passed = 9, [(2, 3)]
    shards = split(single, order, 3)
    for shard, (engine, shard_order) in enumerate(shards):
        assert engine.scope == Scope(shard, 3)
        assert (engine.now_ms, engine.last_seq) == (single.now_ms, single.last_seq)
        assert engine.state.kraft_controller_epoch == 9 and shard_order.passed == [(2, 3)]
        for key in engine.tracker.conditions:
            assert key_shard(key, 3) == shard
        owned = {p for t, p in engine.state.partitions} if shard else set(range(8))
        assert owned == {
            p for p in range(8) if shard in (CLUSTER_SHARD, partition_shard("t", p, 3))
        }
        waiting = shard_order.pending[late["seq"]]
        own = partition_shard("t", 3, 3)
        assert waiting[1] == ("LEAD" if shard == CLUSTER_SHARD else "UPDATE" if shard == own
                              else "TICK")  # fmt: skip
    assert set().union(*(e.tracker.conditions for e, _ in shards)) == held
    assert shards[CLUSTER_SHARD][0].state.brokers.keys() == {1}
    assert all(not e.state.brokers for e, _ in shards[1:])


def test_whose_conditions_are_whose() -> None:
    n = 4
    assert key_shard(("offline_partition", "orders/7"), n) == partition_shard("orders", 7, n)
    assert key_shard(("isr_flapping", "a/b/0"), n) == partition_shard("a/b", 0, n)
    assert key_shard(("controller_epoch_regression", "orders/7"), n) == partition_shard(
        "orders", 7, n
    )
    for cluster_key in [("controller_epoch_regression", "controller"), ("broker_down", "broker/1"),
                        ("topic_deletion_stuck", "topic/orders"), ("consumer_idle", "group/g"),
                        ("leader_election_storm", "cluster"), ("controller_failover",
                                                                "controller")]:  # fmt: skip
        assert key_shard(cluster_key, n) == CLUSTER_SHARD


def test_a_waiting_record_is_routed_as_the_job_routes_it() -> None:
    path = "/brokers/topics/t/partitions/0/state"
    isr = [{"type": EventType.ISR_SHRUNK, "topic": "t", "partition": 0, "leader": 2}]
    whole = (7, "UPDATE", path, orjson.dumps(isr).decode())
    own = partition_shard("t", 0, 2)
    other = 3 - own
    assert routed(whole, own, 2) == whole
    assert routed(whole, other, 2) == (7, "TICK", "", "[]")
    assert routed(whole, CLUSTER_SHARD, 2) == (7, "LEAD", path, leaders_text([("t", 0, 2)]))
    broker = (8, "CREATE", "/brokers/ids/1", "[]")
    assert routed(broker, CLUSTER_SHARD, 2) == broker
    assert routed(broker, 1, 2) == (8, "TICK", "", "[]")


def test_only_the_whole_clusters_engine_is_split() -> None:
    with pytest.raises(NotASingleEngine, match="cannot be split again"):
        split(AlertEngine("c", QUICK, scope=Scope(1, 2)), SeqOrder(), 2)
    with pytest.raises(ValueError, match="1 or more"):
        split(AlertEngine("c", QUICK), SeqOrder(), 0)
    with pytest.raises(ValueError, match=r"not all of 0\.\.2"):
        split(AlertEngine("c", QUICK), SeqOrder(), 2, range(1, 4))
