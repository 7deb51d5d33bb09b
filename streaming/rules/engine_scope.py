"""What one shard of a cluster's alerting owns, so that the work spreads over Spark tasks.

A cluster's alerting is split into one cluster shard and `partition_shards` partition shards:
- a partition shard owns the partitions whose (topic, partition) hashes to it: their state,
  level rules, instant rules and ISR windows. One topic's partitions spread over all of them,
  so one busy topic keeps every core busy;
- the cluster shard owns brokers, the controller, topics, legacy consumer groups and the
  cluster-wide windows (leader-election storms, controller and broker flapping). It folds every
  partition event too, because the preferred-leader counts of a broker, a topic's partition
  count and a group's range assignment are sums over all partitions; it evaluates no partition
  rule.

Every shard sees every record of the cluster, most as a tick (seq and event time only), so each
decides the same seq order, passes the same gaps and fires its timers at the same event time as
the single engine would: the union of the shards' alerts is the single engine's, alert for
alert (tests/unit/streaming/test_sharded_engine.py).
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.rules.cluster_state import Entity

CLUSTER_SHARD = 0

# Events about one partition: its shard applies them, and the cluster shard too.
PARTITION_EVENTS = frozenset({
    EventType.REPLICAS_CHANGED, EventType.PARTITION_STATE_CREATED, EventType.LEADER_CHANGED, EventType.LEADER_EPOCH_BUMPED,
    EventType.ISR_SHRUNK, EventType.ISR_EXPANDED, EventType.PARTITION_OFFLINE, EventType.PARTITION_STATE_REWRITTEN,
})  # fmt: skip
# Events about a topic's partitions: every shard applies its own partitions of them.
ASSIGNMENTS = frozenset({EventType.TOPIC_CREATED, EventType.PARTITIONS_ADDED})
REASSIGNMENTS = frozenset({EventType.REASSIGNMENT_REQUESTED, EventType.REASSIGNMENT_COMPLETED})
# Every shard keeps these: the controller's epoch (partition states are checked against it),
# a topic's min.insync.replicas, a deleted topic's partitions dropped.
EVERY_SHARD = frozenset({
    EventType.CONTROLLER_ELECTED, EventType.CONTROLLER_RESIGNED, EventType.CONTROLLER_EPOCH_CHANGED, EventType.TOPIC_DELETED,
    EventType.CONFIG_CHANGED,
})  # fmt: skip
# A partition's ISR and epoch changes: of these the cluster shard keeps only the leader.
ISR_CHANGES = frozenset({
    EventType.ISR_SHRUNK, EventType.ISR_EXPANDED, EventType.LEADER_EPOCH_BUMPED,
    EventType.PARTITION_STATE_REWRITTEN,
})  # fmt: skip
# Window rules of the partition shards; the others count in the cluster shard.
_PARTITION_WINDOWS = frozenset({"isr_flapping"})


# A partition shard's share of the hash space, in parts. The last shard shares its task with
# the cluster shard (shard_stage.routed puts shard k on task k mod n, so shard n on task 0) and
# gets LIGHTER parts fewer: the cluster shard's work is about 0.4 of a partition shard's at 2
# shards on B3's records (ARCHITECTURE.md), so both tasks finish a micro-batch together.
SHARE, LIGHTER = 8, 3


def hash_space(partition_shards: int) -> int:
    """The modulus of a partition's hash: each shard SHARE parts, the last LIGHTER fewer."""
    return partition_shards * SHARE - (LIGHTER if partition_shards > 1 else 0)


def partition_shard(topic: Any, partition: Any, partition_shards: int) -> int:
    """The shard of a partition: stable across processes and releases (not Python's hash), and
    the same as Spark SQL's `1 + least(pmod(crc32(concat(topic, '/', partition)), space) div
    SHARE, n - 1)` (shard_stage.routed). Whatever an event holds has a shard (no record stops
    the job)."""
    if type(partition) is not int:
        # Not contextlib.suppress: a snapshot's batch asks millions of times, and entering a
        # context manager costs more than the hash.
        try:  # noqa: SIM105
            partition = int(partition)  # "7" of an assignment's keys is partition 7
        except (TypeError, ValueError):
            pass
    return _shard_of(topic, partition, partition_shards)


# Keyed by the partition as a number, so an assignment's "7" and a state's 7 share an entry:
# a shard asks for each partition's shard when it takes the assignment and again when it
# evaluates it.
@functools.lru_cache(maxsize=1 << 17)
def _shard_of(topic: Any, partition: Any, partition_shards: int) -> int:
    part = zlib.crc32(f"{topic}/{partition}".encode()) % hash_space(partition_shards)
    return 1 + min(part // SHARE, partition_shards - 1)


@dataclass(frozen=True)
class Scope:
    shard: int  # CLUSTER_SHARD, or 1..partition_shards
    partition_shards: int

    @property
    def is_cluster(self) -> bool:
        return self.shard == CLUSTER_SHARD

    def _mine(self, topic: Any, partition: Any) -> bool:
        return partition_shard(topic, partition, self.partition_shards) == self.shard

    def view(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The event as this shard applies it (None: not at all). Assignments and
        reassignments span partitions: a partition shard keeps its own of them."""
        kind = event["type"]
        if kind in EVERY_SHARD:
            return event
        if kind in PARTITION_EVENTS:
            mine = self.is_cluster or self._mine(event.get("topic"), event.get("partition"))
            return event if mine else None
        if kind in ASSIGNMENTS:
            if self.is_cluster:
                return event
            topic = event.get("topic")
            assignment = {
                p: r for p, r in (event.get("assignment") or {}).items() if self._mine(topic, p)
            }
            return {**event, "assignment": assignment} if assignment else None
        if kind in REASSIGNMENTS:
            if self.is_cluster:
                return None
            refs = event.get("partitions") or ()
            kept = [r for r in refs if self._mine(r["topic"], r["partition"])]
            return {**event, "partitions": kept} if kept else None
        return event if self.is_cluster else None

    def owns(self, entity: Entity) -> bool:
        """Whether this shard evaluates the entity's level rules and publishes its state."""
        kind, ident = entity
        if kind == "partition":
            return not self.is_cluster and self._mine(*ident)
        return self.is_cluster

    def raises_instants(self, event: dict[str, Any]) -> bool:
        """Whether this shard raises the instant alerts of an event it applies: a partition's
        in its shard, the rest (controller, group, broker) in the cluster shard."""
        if event["type"] in PARTITION_EVENTS:
            return not self.is_cluster
        return self.is_cluster

    def counts(self, rule: str) -> bool:
        """Whether this shard counts the window rule for an event it applies."""
        return (rule in _PARTITION_WINDOWS) != self.is_cluster


STATE_PATH = re.compile(r"/brokers/topics/([^/]+)/partitions/([0-9]{1,9})/state")
_CLUSTER_ONLY = re.compile(r"/(?:brokers/ids|consumers|admin/delete_topics)/")


def full_shards(path: str, partition_shards: int) -> list[int]:
    """The shards that need a record of `path` whole; every other shard gets it as a tick. A
    superset is harmless (each shard keeps only its part), so unknown paths go to all."""
    match = STATE_PATH.fullmatch(path)
    if match is not None:
        topic, partition = match.group(1), int(match.group(2))
        return [CLUSTER_SHARD, partition_shard(topic, partition, partition_shards)]
    if _CLUSTER_ONLY.match(path):
        return [CLUSTER_SHARD]
    return list(range(partition_shards + 1))


def leader_moves(events: Any) -> list[tuple[str, int, int | None]] | None:
    """What the cluster shard needs of a record whose events are all ISR and epoch changes:
    each event's partition and its leader after (None: the event names none), in order; None
    when the record is anything else, so it goes whole. Spark SQL decides the same for the job
    (shard_stage.routed) on events as the Avro schema types them."""
    if not isinstance(events, list) or not events:
        return None
    moves: list[tuple[str, int, int | None]] = []
    for event in events:
        if not isinstance(event, dict) or event.get("type") not in ISR_CHANGES:
            return None
        topic, partition = event.get("topic"), event.get("partition", "")
        after, before = event.get("leader_after"), event.get("leader")
        if not isinstance(topic, str) or not _is_int(partition):
            return None
        if not (after is None or _is_int(after)) or not (before is None or _is_int(before)):
            return None
        leader = after if after is not None else before
        moves.append((topic, int(partition), None if leader is None else int(leader)))
    return moves


def leaders_text(moves: list[tuple[str, int, int | None]]) -> str:
    """Leader moves as `leaders_of` reads them (a null leader left out, as Spark SQL's
    `to_json` leaves it out in the job)."""
    return orjson.dumps(
        [{"t": t, "p": p} if lead is None else {"t": t, "p": p, "l": lead} for t, p, lead in moves]
    ).decode()


def leaders_of(text: str) -> list[tuple[str, int, int | None]]:
    """Each move's partition and leader. The job (shard_stage.routed) writes an event's leader
    after as "a" and its leader as "l", the first present being the leader after the event;
    checkpoints of earlier releases hold moves with "l" alone, already that leader."""
    out = []
    for move in orjson.loads(text):
        after = move.get("a")
        out.append((move["t"], move["p"], move.get("l") if after is None else after))
    return out


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31
