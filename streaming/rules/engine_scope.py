"""What one shard of a cluster's alerting owns, so that the work spreads over Spark tasks.

A cluster's alerting is split into one cluster shard and `topic_shards` topic shards:
- a topic shard owns the partitions and topics whose names hash to it: their state, level
  rules, instant rules and ISR windows;
- the cluster shard owns brokers, the controller, legacy consumer groups and the cluster-wide
  windows (leader-election storms, controller and broker flapping). It folds every partition
  event too, because the preferred-leader counts of a broker and a group's range assignment
  are sums over all topics; it evaluates no partition rule.

Every shard sees every record of the cluster, most as a tick (seq and event time only), so each
decides the same seq order, passes the same gaps and fires its timers at the same event time as
the single engine would: the union of the shards' alerts is the single engine's, alert for
alert (tests/unit/streaming/test_sharded_engine.py)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any

from zkcdc.streaming.rules.cluster_state import Entity

CLUSTER_SHARD = 0

# Events about partitions and topics: the topic's shard applies them, and the cluster shard too
# (preferred-leader counts, the partitions of each topic).
PARTITION_EVENTS = frozenset({
    "TOPIC_CREATED", "PARTITIONS_ADDED", "TOPIC_DELETED", "REPLICAS_CHANGED",
    "PARTITION_STATE_CREATED", "LEADER_CHANGED", "LEADER_EPOCH_BUMPED", "ISR_SHRUNK",
    "ISR_EXPANDED", "PARTITION_OFFLINE",
})  # fmt: skip
# Events only a topic's shard needs (its deletion, its config, reassignments of its partitions).
TOPIC_EVENTS = frozenset({
    "TOPIC_DELETION_REQUESTED", "TOPIC_DELETION_COMPLETED", "REASSIGNMENT_REQUESTED",
    "REASSIGNMENT_COMPLETED",
})  # fmt: skip
# The controller's epoch is what partition states are checked against: every shard keeps it.
CONTROLLER_EVENTS = frozenset({
    "CONTROLLER_ELECTED", "CONTROLLER_RESIGNED", "CONTROLLER_EPOCH_CHANGED",
})  # fmt: skip
# Window rules of the cluster shard; isr_flapping counts per partition, in the topic's shard.
_PARTITION_WINDOWS = frozenset({"isr_flapping"})


def topic_shard(topic: str, topic_shards: int) -> int:
    """The shard of a topic: stable across processes and releases (not Python's hash)."""
    return 1 + zlib.crc32(topic.encode()) % topic_shards


@dataclass(frozen=True)
class Scope:
    shard: int  # CLUSTER_SHARD, or 1..topic_shards
    topic_shards: int

    @property
    def is_cluster(self) -> bool:
        return self.shard == CLUSTER_SHARD

    def _owns_topic(self, topic: Any) -> bool:
        return topic_shard(str(topic), self.topic_shards) == self.shard

    def view(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The event as this shard applies it (None: not at all). A reassignment spans topics:
        a topic shard keeps its own partitions of it."""
        kind = event["type"]
        if kind in CONTROLLER_EVENTS:
            return event
        if kind in PARTITION_EVENTS:
            return event if self.is_cluster or self._owns_topic(event.get("topic")) else None
        if kind in ("REASSIGNMENT_REQUESTED", "REASSIGNMENT_COMPLETED"):
            if self.is_cluster:
                return None
            mine = [r for r in event.get("partitions") or () if self._owns_topic(r["topic"])]
            return {**event, "partitions": mine} if mine else None
        if kind in TOPIC_EVENTS:
            return None if self.is_cluster or not self._owns_topic(event.get("topic")) else event
        if kind == "CONFIG_CHANGED" and event.get("entity_type") == "topics":
            return None if self.is_cluster or not self._owns_topic(event["entity_name"]) else event
        return event if self.is_cluster else None

    def owns(self, entity: Entity) -> bool:
        """Whether this shard evaluates the entity's level rules and publishes its state."""
        kind, ident = entity
        if kind == "partition":
            return not self.is_cluster and self._owns_topic(ident[0])
        if kind == "topic":
            return not self.is_cluster and self._owns_topic(ident)
        return self.is_cluster

    def raises_instants(self, event: dict[str, Any]) -> bool:
        """Whether this shard raises the instant alerts of an event it applies: a partition's
        in its topic's shard, the rest (controller, group, broker) in the cluster shard."""
        if event["type"] in PARTITION_EVENTS:
            return not self.is_cluster
        return self.is_cluster

    def counts(self, rule: str) -> bool:
        """Whether this shard counts the window rule for an event it applies."""
        return (rule in _PARTITION_WINDOWS) != self.is_cluster


_TOPIC_PATH = re.compile(r"/(?:brokers/topics|config/topics|admin/delete_topics)/([^/]+)(?:/.*)?")
_CLUSTER_ONLY = re.compile(r"/(?:brokers/ids|consumers)/")


def full_shards(path: str, topic_shards: int) -> list[int]:
    """The shards that need a record of `path` whole; every other shard gets it as a tick. A
    superset is harmless (each shard keeps only its part), so unknown paths go to all."""
    match = _TOPIC_PATH.match(path)
    if match is not None:
        own = topic_shard(match.group(1), topic_shards)
        return [CLUSTER_SHARD, own] if "/brokers/topics/" in path else [own]
    if _CLUSTER_ONLY.match(path):
        return [CLUSTER_SHARD]
    return list(range(topic_shards + 1))
