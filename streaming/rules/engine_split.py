"""One cluster's single engine, cut into the shards of the sharded layout (engine_scope.py).

A job that starts against a large cluster has its whole backlog (capture's snapshot: two
records a partition) to take before its first alert. Through the shards, every record reaches
every shard, the cluster shard folds every partition's events too, and each shard reads and
writes the buckets a micro-batch touches: three to four times the single engine's Python work
over the same records (BENCHMARKS.md, B9). The single engine can take the backlog instead, and `split`
then gives each shard what it would hold had it seen the same records itself, so the shards
go on from there as if they had.

What each shard holds (engine_scope.Scope says what it applies):
- every shard: event time, the last seq, the controller, its epochs, the topics' configs, and
  the seq order (the same records wait in each, each in that shard's form: whole, a tick, or
  the cluster shard's leader moves);
- the cluster shard: brokers, groups, topic deletions, every partition (for the per-broker and
  per-topic sums) and the conditions, timers and windows of every entity but a partition;
- a partition shard: its own partitions, their reassignments and the sums over them, and its
  partitions' conditions, timers and windows.

The cluster shard's partitions are the single engine's: where it would have kept only a
partition's leader from an ISR change (AlertEngine.process_leaders), it holds the ISR too,
which none of its rules reads. The shards' alerts from then on, merged by place, are the
single engine's (tests/unit/streaming/test_engine_split.py).

Pure: the engine given is left as it was; the shards share its partitions' values, which the
state replaces on every change rather than changing them (ClusterState.change_partition)."""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter, deque

import orjson

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.alert_rules import WindowKey
from zkcdc.streaming.rules.alert_tracker import AlertTracker, Key
from zkcdc.streaming.rules.cluster_state import ClusterState, Group, Partition, PartitionKey
from zkcdc.streaming.rules.engine_scope import (
    CLUSTER_SHARD,
    STATE_PATH,
    Scope,
    full_shards,
    leader_moves,
    leaders_text,
    partition_shard,
)
from zkcdc.streaming.rules.rule_catalog import RULES
from zkcdc.streaming.rules.seq_order import OrderReport, SeqOrder, Waiting

# Rules whose alerts name a partition (TOPIC/PARTITION): a partition shard's. One of them,
# controller_epoch_regression, names the controller too, which is the cluster shard's.
_PARTITION_RULES = frozenset(rule.id for rule in RULES if "TOPIC/PARTITION" in rule.entity)
_CONTROLLER = "controller"


class NotASingleEngine(StreamingError):
    """`split` was given a shard's engine: only the whole cluster's can be cut."""


def split(
    engine: AlertEngine, order: SeqOrder, partition_shards: int, shards: range | None = None
) -> list[tuple[AlertEngine, SeqOrder]]:
    """The single engine and its order as the cluster shard (0) and each of `partition_shards`
    partition shards would hold them, having seen the same records: those of `shards` (every
    shard by default), in order. The partition shards' partitions are sorted out only when one
    of them is asked for (~1.5 s at 1,000,000 partitions)."""
    if engine.scope is not None:
        raise NotASingleEngine(f"a shard's engine ({engine.scope}) cannot be split again")
    if partition_shards < 1:
        raise ValueError(f"partition_shards must be 1 or more, not {partition_shards}")
    shards = range(partition_shards + 1) if shards is None else shards
    if shards and not (min(shards) >= 0 and max(shards) <= partition_shards):
        raise ValueError(f"shards {shards} are not all of 0..{partition_shards}")
    mine = _by_shard(engine.state.partitions, partition_shards) if any(shards) else {}
    return [
        (_engine(engine, Scope(shard, partition_shards), mine), _order(order, shard,
                                                                       partition_shards))
        for shard in shards
    ]  # fmt: skip


def key_shard(key: Key | WindowKey, partition_shards: int) -> int:
    """The shard that keeps a condition, timer or window of (rule, entity)."""
    rule, entity = key
    if rule in _PARTITION_RULES and entity != _CONTROLLER:
        topic, _, partition = entity.rpartition("/")
        return partition_shard(topic, partition, partition_shards)
    return CLUSTER_SHARD


def routed(waiting: Waiting, shard: int, partition_shards: int) -> Waiting:
    """A waiting record (ts, op, path, events as JSON) in the form one shard gets it, as the
    job's routing writes it (shard_stage.routed): whole, a tick, or the cluster shard's leader
    moves."""
    ts, _, path, events = waiting
    if shard not in full_shards(path, partition_shards):
        return (ts, "TICK", "", "[]")
    if shard == CLUSTER_SHARD and STATE_PATH.fullmatch(path):
        moves = leader_moves(orjson.loads(events))
        if moves is not None:
            return (ts, "LEAD", path, leaders_text(moves))
    return waiting


def _by_shard(
    partitions: dict[PartitionKey, Partition], partition_shards: int
) -> dict[int, dict[PartitionKey, Partition]]:
    out: dict[int, dict[PartitionKey, Partition]] = {
        shard: {} for shard in range(1, partition_shards + 1)
    }
    for key, partition in partitions.items():
        out[partition_shard(key[0], key[1], partition_shards)][key] = partition
    return out


def _engine(
    whole: AlertEngine, scope: Scope, mine: dict[int, dict[PartitionKey, Partition]]
) -> AlertEngine:
    shard = AlertEngine(whole.cluster, whole.settings, scope=scope)
    shard.now_ms, shard.last_seq = whole.now_ms, whole.last_seq
    n = scope.partition_shards
    shard.state = _state(whole.state, scope, whole.state.partitions if scope.is_cluster
                         else mine[scope.shard])  # fmt: skip
    shard.tracker = _tracker(whole.tracker, scope.shard, n)
    shard.windows = {
        key: deque(times) for key, times in whole.windows.items()
        if key_shard(key, n) == scope.shard
    }  # fmt: skip
    expiries = {
        rule: deque(entry for entry in due if key_shard(entry[1], n) == scope.shard)
        for rule, due in whole.window_expiries.items()
    }
    shard.window_expiries = {rule: due for rule, due in expiries.items() if due}
    shard.changed = {entity for entity in whole.changed if scope.owns(entity)}
    return shard


def _state(
    whole: ClusterState, scope: Scope, partitions: dict[PartitionKey, Partition]
) -> ClusterState:
    state = ClusterState(whole.cluster)
    state.topic_configs = {topic: dict(config) for topic, config in whole.topic_configs.items()}
    state.controller, state.last_controller = whole.controller, whole.last_controller
    state.controller_epoch = whole.controller_epoch
    state.kraft_controller_epoch = whole.kraft_controller_epoch
    state.partitions = dict(partitions)
    if scope.is_cluster:
        state.topics = {topic: set(numbers) for topic, numbers in whole.topics.items()}
        state.brokers = {broker: dataclasses.replace(b) for broker, b in whole.brokers.items()}
        state.deletions = set(whole.deletions)
        state.groups = {name: _group(g) for name, g in whole.groups.items()}
        state.preferred, state.not_led = Counter(whole.preferred), Counter(whole.not_led)
        return state
    for topic, number in partitions:
        state.topics.setdefault(topic, set()).add(number)
    for partition in partitions.values():
        state._count_preferred(partition, +1)
    state.reassignments = {key for key in whole.reassignments if scope.owns(("partition", key))}
    return state


def _group(group: Group) -> Group:
    return Group(
        {member: dict(topics) for member, topics in group.members.items()},
        dict(group.owners),
        dict(group.offsets),
    )


def _tracker(whole: AlertTracker, shard: int, partition_shards: int) -> AlertTracker:
    tracker = AlertTracker(whole.cluster)
    tracker.conditions = {
        key: dataclasses.replace(c, details=dict(c.details))
        for key, c in whole.conditions.items()
        if key_shard(key, partition_shards) == shard
    }
    tracker._due = [entry for entry in whole._due if key_shard(entry[1], partition_shards) == shard]
    heapq.heapify(tracker._due)
    return tracker


def _order(whole: SeqOrder, shard: int, partition_shards: int) -> SeqOrder:
    order = SeqOrder(whole.partitions, whole.silent_ms)
    order.pending = {
        seq: routed(waiting, shard, partition_shards) for seq, waiting in whole.pending.items()
    }
    order.heads, order.head_ts = dict(whole.heads), dict(whole.head_ts)
    order.heard = dict(whole.heard)
    order.turn, order.newest_ts, order.first_ts = whole.turn, whole.newest_ts, whole.first_ts
    order.passed = list(whole.passed)
    order.report = OrderReport(**dataclasses.asdict(whole.report))
    return order
