"""A cluster's alerting split into shards gives the single engine's alerts, in its order, and
its state: for any records (hypothesis), any number of topic shards, gaps and all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.ground.change_types import EventType
from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_scope import (
    CLUSTER_SHARD,
    Scope,
    full_shards,
    leaders_of,
    leaders_text,
    partition_shard,
)
from zkcdc.streaming.rules.rule_catalog import RULE_IDS
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import SeqOrder
from zkcdc.streaming.rules.sharded_alerts import ShardedAlerts, merged, shard_record

# Small for-durations, windows and thresholds: timers and windows come due within a test.
QUICK = RuleSettings(
    under_replicated_for_ms=2_000, under_min_isr_for_ms=1_000, no_active_controller_for_ms=2_000,
    broker_down_for_ms=1_000, preferred_leader_imbalance_for_ms=3_000,
    reassignment_stuck_for_ms=4_000, topic_deletion_stuck_for_ms=4_000,
    consumer_partition_unowned_for_ms=2_000, consumer_idle_for_ms=3_000,
    consumer_owner_mismatch_for_ms=3_000, instant_hold_ms=5_000, isr_flapping_changes=3,
    isr_flapping_window_ms=8_000, leader_election_storm_changes=4,
    leader_election_storm_window_ms=8_000, controller_flapping_changes=2,
    controller_flapping_window_ms=10_000, broker_flapping_changes=3,
    broker_flapping_window_ms=10_000,
)  # fmt: skip

TOPICS = ["orders", "payments", "clicks", "audit", "x"]
BROKERS = [1, 2, 3, 4]
# Weighted to one broker and one topic, so that windows and groups fill up.
brokers = st.sampled_from([1, 1, 1, *BROKERS])
topics = st.sampled_from(["orders", "orders", *TOPICS])
partitions = st.integers(0, 3)
replica_lists = st.lists(brokers, min_size=1, max_size=3, unique=True)
maybe_epoch = st.one_of(st.none(), st.integers(0, 6))


def _path_state(t: str, p: int) -> str:
    return f"/brokers/topics/{t}/partitions/{p}/state"


@st.composite
def record_bodies(draw: Any) -> tuple[str, list[dict[str, Any]]]:
    """(path, events) as the decoders make them, over a small cluster."""
    kind = draw(st.sampled_from([
        "broker", "controller", "controller_epoch", "topic", "state", "leader", "isr", "offline",
        "replicas", "reassign", "delete", "config", "consumer", "owner", "offset", "log_dir",
        "heartbeat", "consumer", "owner", "owner", "state", "broker", "isr", "isr",
    ]))  # fmt: skip
    t, p, b = draw(topics), draw(partitions), draw(brokers)
    if kind == "broker":
        up = draw(
            st.sampled_from(
                [
                    EventType.BROKER_REGISTERED,
                    EventType.BROKER_DEREGISTERED,
                    EventType.BROKER_UPDATED,
                ]
            )
        )
        return f"/brokers/ids/{b}", [
            {"type": up, "broker_id": b, "broker_epoch": draw(maybe_epoch)}
        ]
    if kind == "controller":
        if draw(st.booleans()):
            event = {"type": EventType.CONTROLLER_ELECTED, "broker_id": b,
                     "broker_id_before": draw(st.one_of(st.none(), brokers)),
                     "epoch_after": draw(maybe_epoch)}  # fmt: skip
        else:
            event = {"type": EventType.CONTROLLER_RESIGNED, "broker_id": b}
        return "/controller", [event]
    if kind == "controller_epoch":
        event = {"type": EventType.CONTROLLER_EPOCH_CHANGED, "epoch_before": draw(maybe_epoch),
                 "epoch_after": draw(st.integers(0, 6))}  # fmt: skip
        return "/controller_epoch", [event]
    if kind == "topic":
        how = draw(
            st.sampled_from(
                [EventType.TOPIC_CREATED, EventType.PARTITIONS_ADDED, EventType.TOPIC_DELETED]
            )
        )
        assignment = draw(st.dictionaries(st.integers(0, 3).map(str), replica_lists, max_size=4))
        return f"/brokers/topics/{t}", [{"type": how, "topic": t, "assignment": assignment}]
    if kind == "replicas":
        event = {"type": EventType.REPLICAS_CHANGED, "topic": t, "partition": p,
                 "replicas_after": draw(replica_lists),
                 "adding": draw(st.lists(brokers, max_size=1)),
                 "removing": draw(st.lists(brokers, max_size=1))}  # fmt: skip
        return f"/brokers/topics/{t}", [event]
    if kind == "state":
        event = {"type": EventType.PARTITION_STATE_CREATED, "topic": t, "partition": p, "leader": b,
                 "isr": draw(replica_lists), "leader_epoch": draw(st.integers(0, 6)),
                 "controller_epoch": draw(st.integers(0, 6))}  # fmt: skip
        return _path_state(t, p), [event]
    if kind in ("leader", "offline"):
        after = -1 if kind == "offline" else b
        leader = {"type": EventType.LEADER_CHANGED, "topic": t, "partition": p,
                  "leader_before": draw(brokers), "leader_after": after,
                  "isr_after": draw(replica_lists), "leader_epoch_before": draw(maybe_epoch),
                  "leader_epoch_after": draw(maybe_epoch), "controller_epoch": draw(maybe_epoch),
                  "clean": draw(st.one_of(st.none(), st.booleans()))}  # fmt: skip
        events = [leader]
        if kind == "offline":
            events.append({**leader, "type": EventType.PARTITION_OFFLINE})
        return _path_state(t, p), events
    if kind == "isr":
        # One or two ISR and epoch changes, a leader named either way or not at all (the
        # cluster shard takes these as leader moves only: engine_scope.leader_moves).
        isr_events = []
        for _ in range(draw(st.integers(1, 2))):
            how = draw(
                st.sampled_from(
                    [
                        EventType.ISR_SHRUNK,
                        EventType.ISR_EXPANDED,
                        EventType.LEADER_EPOCH_BUMPED,
                        EventType.PARTITION_STATE_REWRITTEN,
                    ]
                )
            )
            named = draw(st.sampled_from(["leader", "leader_after", "both", "none"]))
            event = {"type": how, "topic": t, "partition": p,
                     "isr_before": draw(replica_lists), "isr_after": draw(replica_lists),
                     "controller_epoch": draw(maybe_epoch),
                     "leader_epoch_after": draw(maybe_epoch)}  # fmt: skip
            if named in ("leader", "both"):
                event["leader"] = draw(brokers)
            if named in ("leader_after", "both"):
                event["leader_after"] = draw(st.one_of(st.none(), brokers))
            isr_events.append(event)
        return _path_state(t, p), isr_events
    if kind == "reassign":
        how = draw(
            st.sampled_from([EventType.REASSIGNMENT_REQUESTED, EventType.REASSIGNMENT_COMPLETED])
        )
        refs = draw(st.lists(st.fixed_dictionaries({"topic": topics, "partition": partitions}),
                             max_size=4))  # fmt: skip
        return "/admin/reassign_partitions", [{"type": how, "partitions": refs}]
    if kind == "delete":
        how = draw(
            st.sampled_from(
                [EventType.TOPIC_DELETION_REQUESTED, EventType.TOPIC_DELETION_COMPLETED]
            )
        )
        return f"/admin/delete_topics/{t}", [{"type": how, "topic": t}]
    if kind == "config":
        config = draw(st.dictionaries(st.just("min.insync.replicas"), st.sampled_from("0123"),
                                      max_size=1))  # fmt: skip
        event = {"type": EventType.CONFIG_CHANGED, "entity_type": "topics", "entity_name": t,
                 "config_after": config}  # fmt: skip
        return f"/config/topics/{t}", [event]
    g, c = draw(st.sampled_from(["g1", "g1", "g2"])), draw(st.sampled_from(["c1", "c2", "c3"]))
    if kind == "consumer":
        how = draw(
            st.sampled_from([EventType.CONSUMER_REGISTERED, EventType.CONSUMER_DEREGISTERED])
        )
        subscription = draw(st.dictionaries(topics, st.integers(1, 2), max_size=2))
        event = {"type": how, "group": g, "consumer_id": c, "subscription": subscription}
        return f"/consumers/{g}/ids/{c}", [event]
    if kind == "owner":
        owner = draw(st.one_of(st.none(), st.sampled_from(["c1-0", "c2-0", "c3-0", "c1-1"])))
        event = {"type": EventType.PARTITION_OWNER_CHANGED, "group": g, "topic": t, "partition": p,
                 "owner_after": owner}  # fmt: skip
        return f"/consumers/{g}/owners/{t}/{p}", [event]
    if kind == "offset":
        event = {"type": EventType.OFFSET_COMMITTED, "group": g, "topic": t, "partition": p,
                 "offset_before": draw(st.one_of(st.none(), st.integers(0, 9))),
                 "offset_after": draw(st.integers(0, 9))}  # fmt: skip
        return f"/consumers/{g}/offsets/{t}/{p}", [event]
    if kind == "log_dir":
        return "/log_dir_event_notification/log_dir_event_1", [
            {"type": EventType.LOG_DIR_FAILED, "broker_id": b}
        ]
    return "", []


def _healthy_cluster() -> list[tuple[str, list[dict[str, Any]]]]:
    """A snapshot of a cluster where nothing is wrong, for the random changes to break."""
    bodies: list[tuple[str, list[dict[str, Any]]]] = [
        (f"/brokers/ids/{b}", [{"type": EventType.BROKER_REGISTERED, "broker_id": b}])
        for b in BROKERS
    ]
    bodies.append(("/controller", [{"type": EventType.CONTROLLER_ELECTED, "broker_id": 1}]))
    bodies.append(
        ("/controller_epoch", [{"type": EventType.CONTROLLER_EPOCH_CHANGED, "epoch_after": 3}])
    )
    layout = {"orders": [[1, 2, 3], [2, 3, 1], [3, 1, 2]], "payments": [[1, 2], [2, 1]]}
    for t, replicas in layout.items():
        assignment = {str(p): r for p, r in enumerate(replicas)}
        bodies.append((f"/brokers/topics/{t}",
                       [{"type": EventType.TOPIC_CREATED, "topic": t, "assignment": assignment}]))  # fmt: skip
        for p, r in enumerate(replicas):
            bodies.append((_path_state(t, p), [{
                "type": EventType.PARTITION_STATE_CREATED, "topic": t, "partition": p, "leader": r[0],
                "isr": r, "leader_epoch": 2, "controller_epoch": 3,
            }]))  # fmt: skip
    config = {"type": EventType.CONFIG_CHANGED, "entity_type": "topics", "entity_name": "orders",
              "config_after": {"min.insync.replicas": "2"}}  # fmt: skip
    bodies.append(("/config/topics/orders", [config]))
    for c in ("c1", "c2"):
        bodies.append((f"/consumers/g1/ids/{c}", [{"type": EventType.CONSUMER_REGISTERED, "group": "g1",
                                                   "consumer_id": c,
                                                   "subscription": {"orders": 1}}]))  # fmt: skip
    for p, owner in enumerate(["c1-0", "c1-0", "c2-0"]):
        bodies.append((f"/consumers/g1/owners/orders/{p}", [{
            "type": EventType.PARTITION_OWNER_CHANGED, "group": "g1", "topic": "orders", "partition": p,
            "owner_after": owner,
        }]))  # fmt: skip
    return bodies


@st.composite
def record_streams(draw: Any) -> list[dict[str, Any]]:
    # A change repeated a few times in a row, as flapping brokers and ISRs do.
    runs = draw(st.lists(st.tuples(record_bodies(), st.sampled_from([1, 1, 1, 2, 4])),
                         min_size=1, max_size=80))  # fmt: skip
    bodies = [body for body, times in runs for _ in range(times)]
    start = _healthy_cluster() if draw(st.booleans()) else []
    records, ts = [], 1_000_000
    for seq, (path, events) in enumerate(start + bodies, start=1):
        ts += 0 if seq <= len(start) else draw(st.sampled_from([0, 0, 1, 250, 900, 2_500, 6_000]))
        op = (
            "HEARTBEAT"
            if not path
            else "READ"
            if seq <= len(start)
            else draw(st.sampled_from(["UPDATE", "UPDATE", "CREATE", "DELETE", "READ"]))
        )
        records.append({"seq": seq, "ts_ms": ts, "op": op, "path": path, "events": events})
    return records


def _single(records: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
    engine = AlertEngine("c", QUICK)
    alerts: list[Any] = []
    state: dict[str, Any] = {}
    for record in records:
        alerts += engine.process(record)
        state.update(engine.take_state())
    return alerts, state


def _sharded(
    records: list[dict[str, Any]], partition_shards: int
) -> tuple[list[Any], dict[str, Any]]:
    shards = ShardedAlerts("c", QUICK, partition_shards)
    alerts: list[Any] = []
    state: dict[str, Any] = {}
    for record in records:
        alerts += shards.process(record)
        state.update(shards.take_state())
    return alerts, state


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.integers(1, 5))
def test_shards_give_the_single_engines_alerts_in_its_order_and_its_state(
    records: list[dict[str, Any]], partition_shards: int
) -> None:
    alerts, state = _single(records)
    sharded_alerts, sharded_state = _sharded(records, partition_shards)
    assert sharded_alerts == alerts
    assert sharded_state == state


def test_the_generated_streams_reach_every_rule() -> None:
    """The property above is only as good as its records: they must reach each rule."""
    reached: set[str] = set()

    @settings(max_examples=600, derandomize=True, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(record_streams())
    def collect(records: list[dict[str, Any]]) -> None:
        reached.update(alert.rule for alert in _single(records)[0])

    collect()
    assert sorted(RULE_IDS - reached) == []


def test_a_stored_event_logs_alerts_and_state_are_the_same_over_shards() -> None:
    records = list(read_records(Path(__file__).parents[2] / "fixtures" / "event_log_v1"))
    alerts, state = _single(records)
    assert alerts, "the stored incident raises alerts"
    for partition_shards in (1, 2, 7):
        assert _sharded(records, partition_shards) == (alerts, state)


def test_each_record_goes_whole_only_where_it_is_needed() -> None:
    n = 4
    own = partition_shard("orders", 7, n)
    assert full_shards("/brokers/topics/orders/partitions/7/state", n) == [CLUSTER_SHARD, own]
    assert full_shards("/brokers/ids/3", n) == [CLUSTER_SHARD]
    assert full_shards("/consumers/g/offsets/orders/0", n) == [CLUSTER_SHARD]
    assert full_shards("/admin/delete_topics/orders", n) == [CLUSTER_SHARD]
    for everyone in ("/brokers/topics/orders", "/config/topics/orders", "/controller",
                     "/admin/reassign_partitions", "/somewhere/else"):  # fmt: skip
        assert full_shards(everyone, n) == list(range(n + 1))
    assert 1 <= own <= n and partition_shard("orders", 7, n) == own  # stable


def test_leader_moves_read_as_the_job_writes_them_and_as_earlier_releases_kept_them() -> None:
    """The job writes each move's leader after ("a") beside its leader ("l"), the first present
    winning (shard_stage.routed); a checkpoint of an earlier release may hold moves waiting for
    their turn with "l" alone, already that leader."""
    written = '[{"t":"t","p":1,"a":2,"l":1},{"t":"t","p":2,"l":3},{"t":"u","p":0}]'
    assert leaders_of(written) == [("t", 1, 2), ("t", 2, 3), ("u", 0, None)]
    kept = '[{"t":"t","p":1,"l":2},{"t":"u","p":0}]'
    assert leaders_of(kept) == [("t", 1, 2), ("u", 0, None)]
    moves = [("t", 1, 2), ("u", 0, None)]
    assert leaders_of(leaders_text(moves)) == moves


def test_one_topics_partitions_spread_over_every_shard() -> None:
    n = 4
    assert {partition_shard("t", p, n) for p in range(40)} == {1, 2, 3, 4}


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_shard_beside_the_cluster_shard_gets_fewer_partitions(n: int) -> None:
    """Shard n shares task 0 with the cluster shard: 5 parts of the hash space, the others 8."""
    count = 40_000
    shards = [partition_shard("t", p, n) for p in range(count)]
    share = {s: shards.count(s) / count for s in range(1, n + 1)}
    space = 8 * n - 3
    for s in range(1, n):
        assert share[s] == pytest.approx(8 / space, abs=0.01)
    assert share[n] == pytest.approx(5 / space, abs=0.01)


def test_assignments_and_reassignments_are_split_by_partition() -> None:
    n = 3
    refs = [{"topic": t, "partition": p} for t in TOPICS for p in range(4)]
    moved = {"type": EventType.REASSIGNMENT_REQUESTED, "partitions": refs}
    created = {
        "type": EventType.TOPIC_CREATED,
        "topic": "t",
        "assignment": {str(p): [1] for p in range(9)},
    }
    assert Scope(CLUSTER_SHARD, n).view(moved) is None
    assert Scope(CLUSTER_SHARD, n).view(created) == created
    kept: list[tuple[str, int]] = []
    assigned: list[str] = []
    for shard in range(1, n + 1):
        scope = Scope(shard, n)
        mine = scope.view(moved)
        kept += [] if mine is None else [(r["topic"], r["partition"]) for r in mine["partitions"]]
        view = scope.view(created)
        assigned += [] if view is None else list(view["assignment"])
    assert sorted(kept) == sorted((r["topic"], r["partition"]) for r in refs)
    assert sorted(assigned, key=int) == [str(p) for p in range(9)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.integers(1, 4), st.randoms(use_true_random=False))
def test_a_shard_draining_its_ticks_in_bulk_gives_what_it_gives_record_by_record(
    records: list[dict[str, Any]], partition_shards: int, random: Any
) -> None:
    """The alert job's shards skip the work of a tick before anything comes due
    (alert_job.drain_ordered): the same alerts, order and state as one record at a time."""
    reference = ShardedAlerts("c", QUICK, partition_shards)
    expected = reference.process_ordered_all(records)
    engines = [
        AlertEngine("c", QUICK, scope=Scope(shard, partition_shards))
        for shard in range(partition_shards + 1)
    ]
    placed: list[Any] = []
    for start in range(0, len(records), 7):  # micro-batches of 7 records, in any order inside
        chunk = records[start : start + 7]
        for shard, engine in enumerate(engines):
            order = SeqOrder(partitions=1)
            for r in random.sample(chunk, len(chunk)):
                r = shard_record(r, shard, partition_shards)
                lead = r["op"] == "LEAD"
                events = leaders_text(r["events"]) if lead else orjson.dumps(r["events"]).decode()
                order.add(r["seq"], 0, (r["ts_ms"], r["op"], r["path"], events), engine.last_seq)
            placed += drain_ordered(engine, order)
            assert not order.pending
    assert [a for _, a in merged(placed)] == expected
    assert sorted(u for e in engines for u in e.take_state()) == sorted(reference.take_state())
