"""The live state of one Kafka cluster, folded from the typed events of its change records.

`apply` takes one event (as decoded from Avro: a dict with the contract's field names) and
says which entities it touched, so the rules re-evaluate only those: a broker failure on a
200,000-partition cluster must not re-check every partition for every record."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from zkcdc.ground.change_types import EventType

PartitionKey = tuple[str, int]
Entity = tuple[str, Any]  # ("partition", key) | ("broker", id) | ("controller", None) | ...
# The one topic config the rules read (a partition's under_min_isr).
MIN_INSYNC = "min.insync.replicas"


@dataclass
class Partition:
    replicas: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    leader: int | None = None  # None: no state znode seen yet
    isr: tuple[int, ...] = ()
    leader_epoch: int = -1
    controller_epoch: int = -1

    @property
    def replication_factor(self) -> int:
        """Replicas that count for under-replication: not those a reassignment is adding."""
        if not self.adding:  # the common case, asked for at every state change
            return len(self.replicas)
        return len([b for b in self.replicas if b not in self.adding])


@dataclass
class Broker:
    alive: bool
    endpoints: tuple[str, ...] = ()
    epoch: int | None = None


@dataclass
class Group:
    members: dict[str, dict[str, int]] = field(default_factory=dict)  # consumer -> {topic: n}
    owners: dict[PartitionKey, str] = field(default_factory=dict)  # -> thread id
    offsets: dict[PartitionKey, int] = field(default_factory=dict)


@dataclass
class ClusterState:
    cluster: str
    partitions: dict[PartitionKey, Partition] = field(default_factory=dict)
    topics: dict[str, set[int]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    brokers: dict[int, Broker] = field(default_factory=dict)
    controller: int | None = None
    last_controller: int | None = None
    controller_epoch: int | None = None
    # A KRaft controller's epoch (a ZooKeeper-to-KRaft migration): what it writes states with.
    kraft_controller_epoch: int | None = None
    deletions: set[str] = field(default_factory=set)
    reassignments: set[PartitionKey] = field(default_factory=set)
    groups: dict[str, Group] = field(default_factory=dict)
    # Per broker: partitions whose preferred (first) replica it is, and of those, not led by it.
    preferred: Counter[int] = field(default_factory=Counter)
    not_led: Counter[int] = field(default_factory=Counter)

    def apply(self, event: dict[str, Any]) -> set[Entity]:
        kind = event["type"]
        handler = _HANDLERS.get(kind)
        return handler(self, event) if handler else set()

    def settle(self, event: dict[str, Any]) -> None:
        """What an applied event leaves once the rules have compared it with the state before
        it: an elected controller is the last one known from then on."""
        if event["type"] == EventType.CONTROLLER_ELECTED:
            self.last_controller = event["broker_id"]

    def fold(self, event: dict[str, Any]) -> set[Entity]:
        """`apply` then `settle`: the state after the event, where no rule looks in between."""
        touched = self.apply(event)
        self.settle(event)
        return touched

    # -- partitions -----------------------------------------------------------------------------
    def change_partition(self, key: PartitionKey, changes: dict[str, Any]) -> set[Entity]:
        """The partition at `key` with `changes` (field → value) applied, or made from them; the
        entities whose rules the change can move."""
        old = self.partitions.get(key)
        if old is None:
            new = Partition(**changes)
        else:  # a copy with the changes, without the dataclass __init__ (once per state change)
            new = object.__new__(Partition)
            new.__dict__ = {**old.__dict__, **changes}
        touched: set[Entity] = {("partition", key)}
        # Only a new partition, new replicas or a new leader can move the preferred counts.
        moved = old is None or "replicas" in changes or new.leader != old.leader
        if moved and _preference(old) != _preference(new):
            touched |= self._count_preferred(old, -1) | self._count_preferred(new, +1)
        self.partitions[key] = new
        if old is None:
            self.topics.setdefault(key[0], set()).add(key[1])
        return touched

    def leader_stays(self, key: PartitionKey, leader: int | None) -> bool:
        """Whether the partition at `key` is known and `leader` (None: an event that names
        none) leaves its leader as it is."""
        known = self.partitions.get(key)
        return known is not None and (leader is None or leader == known.leader)

    def drop_topic(self, topic: str) -> set[Entity]:
        touched: set[Entity] = {("topic", topic)}
        for partition in self.topics.pop(topic, set()):
            old = self.partitions.pop((topic, partition), None)
            touched |= self._count_preferred(old, -1) | {("partition", (topic, partition))}
        self.topic_configs.pop(topic, None)
        return touched

    def _count_preferred(self, partition: Partition | None, sign: int) -> set[Entity]:
        if partition is None or not partition.replicas:
            return set()
        broker = partition.replicas[0]
        self.preferred[broker] += sign
        if partition.leader is not None and partition.leader != broker:
            self.not_led[broker] += sign
        return {("broker", broker)}

    def min_insync(self, topic: str, default: int) -> int:
        value = self.topic_configs.get(topic, {}).get(MIN_INSYNC)
        return int(value) if value and value.isdigit() else default


def _preference(partition: Partition | None) -> tuple[int, bool] | None:
    """What a partition adds to the preferred-leader counts: (its preferred broker, whether
    another broker leads it)."""
    if partition is None or not partition.replicas:
        return None
    broker = partition.replicas[0]
    return broker, partition.leader is not None and partition.leader != broker


def _assignment(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    topic = event["topic"]
    touched: set[Entity] = {("topic", topic)}
    for partition, replicas in (event.get("assignment") or {}).items():
        touched |= state.change_partition((topic, int(partition)), {"replicas": tuple(replicas)})
    return touched


def _replicas(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    return state.change_partition(
        (event["topic"], event["partition"]),
        {
            "replicas": tuple(event["replicas_after"] or ()),
            "adding": tuple(event.get("adding") or ()),
            "removing": tuple(event.get("removing") or ()),
        },
    )


def _state_created(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    return state.change_partition(
        (event["topic"], event["partition"]),
        {
            "leader": event["leader"],
            "isr": tuple(event["isr"] or ()),
            "leader_epoch": event["leader_epoch"],
            "controller_epoch": event["controller_epoch"],
        },
    )


def leader_after(event: dict[str, Any]) -> int | None:
    """The leader a partition-state event leaves: its leader after, else its leader (None: it
    names none). What the cluster shard skips on (AlertEngine._isr_only) must be what a state
    change would keep."""
    leader = event.get("leader_after")
    return event.get("leader") if leader is None else leader


def _state_changed(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    get = event.get
    changes: dict[str, Any] = {"isr": tuple(get("isr_after") or get("isr") or ())}
    leader = leader_after(event)
    if leader is not None:
        changes["leader"] = leader
    if (leader_epoch := get("leader_epoch_after")) is not None:
        changes["leader_epoch"] = leader_epoch
    if (controller_epoch := get("controller_epoch")) is not None:
        changes["controller_epoch"] = controller_epoch
    return state.change_partition((event["topic"], event["partition"]), changes)


def _broker(alive: bool) -> Any:
    def handle(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
        broker = event["broker_id"]
        old = state.brokers.get(broker)
        state.brokers[broker] = Broker(
            alive,
            tuple(event.get("endpoints") or (old.endpoints if old else ())),
            event.get("broker_epoch") or (old.epoch if old else None),
        )
        return {("broker", broker), ("controller", None)}

    return handle


def _controller_elected(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    state.controller = event["broker_id"]
    state.kraft_controller_epoch = event.get("epoch_after")
    return {("controller", None)}


def _controller_resigned(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    state.last_controller = event["broker_id"]
    state.controller = None
    state.kraft_controller_epoch = None
    return {("controller", None)}


def _controller_epoch(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    state.controller_epoch = event["epoch_after"]
    return {("controller", None)}


def _reassignment(requested: bool) -> Any:
    def handle(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
        touched: set[Entity] = set()
        for ref in event.get("partitions") or ():
            key = (ref["topic"], ref["partition"])
            (state.reassignments.add if requested else state.reassignments.discard)(key)
            touched.add(("partition", key))
        return touched

    return handle


def _deletion(requested: bool) -> Any:
    def handle(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
        topic = event["topic"]
        (state.deletions.add if requested else state.deletions.discard)(topic)
        return {("topic", topic)}

    return handle


def _config(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    if event.get("entity_type") != "topics":
        return set()
    topic = event["entity_name"]
    before = state.topic_configs.get(topic, {}).get(MIN_INSYNC)
    state.topic_configs[topic] = dict(event.get("config_after") or {})
    if state.topic_configs[topic].get(MIN_INSYNC) == before:
        # Of a topic's config its partitions' rules read only min.insync.replicas: a snapshot
        # names every topic's config, mostly without it.
        return {("topic", topic)}
    return {("topic", topic)} | {("partition", (topic, p)) for p in state.topics.get(topic, ())}


def _consumer(joined: bool) -> Any:
    def handle(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
        group = state.groups.setdefault(event["group"], Group())
        if joined:
            group.members[event["consumer_id"]] = dict(event.get("subscription") or {})
        else:
            group.members.pop(event["consumer_id"], None)
        return {("group", event["group"])}

    return handle


def _owner(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    group = state.groups.setdefault(event["group"], Group())
    key = (event["topic"], event["partition"])
    if event.get("owner_after"):
        group.owners[key] = event["owner_after"]
    else:
        group.owners.pop(key, None)
    return {("group", event["group"])}


def _offset(state: ClusterState, event: dict[str, Any]) -> set[Entity]:
    group = state.groups.setdefault(event["group"], Group())
    group.offsets[(event["topic"], event["partition"])] = event["offset_after"]
    return {("group", event["group"])}


_HANDLERS: dict[str, Any] = {
    EventType.BROKER_REGISTERED: _broker(True),
    EventType.BROKER_UPDATED: _broker(True),
    EventType.BROKER_DEREGISTERED: _broker(False),
    EventType.CONTROLLER_ELECTED: _controller_elected,
    EventType.CONTROLLER_RESIGNED: _controller_resigned,
    EventType.CONTROLLER_EPOCH_CHANGED: _controller_epoch,
    EventType.TOPIC_CREATED: _assignment,
    EventType.PARTITIONS_ADDED: _assignment,
    EventType.TOPIC_DELETED: lambda state, event: state.drop_topic(event["topic"]),
    EventType.REPLICAS_CHANGED: _replicas,
    EventType.PARTITION_STATE_CREATED: _state_created,
    EventType.LEADER_CHANGED: _state_changed,
    EventType.LEADER_EPOCH_BUMPED: _state_changed,
    EventType.ISR_SHRUNK: _state_changed,
    EventType.ISR_EXPANDED: _state_changed,
    EventType.PARTITION_OFFLINE: _state_changed,
    EventType.PARTITION_STATE_REWRITTEN: _state_changed,
    EventType.REASSIGNMENT_REQUESTED: _reassignment(True),
    EventType.REASSIGNMENT_COMPLETED: _reassignment(False),
    EventType.TOPIC_DELETION_REQUESTED: _deletion(True),
    EventType.TOPIC_DELETION_COMPLETED: _deletion(False),
    EventType.CONFIG_CHANGED: _config,
    EventType.CONSUMER_REGISTERED: _consumer(True),
    EventType.CONSUMER_DEREGISTERED: _consumer(False),
    EventType.PARTITION_OWNER_CHANGED: _owner,
    EventType.OFFSET_COMMITTED: _offset,
}
