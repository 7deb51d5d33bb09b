"""The cluster's metadata as the KRaft log builds it, record by record: Kafka's own replay rules
(`MetadataDelta`, `PartitionRegistration.merge`), kept as plain data.

`apply` returns what a record changed, as keys of the tree it projects onto (`zk_tree`), so only
those paths are rendered again. Records between `BeginTransactionRecord` and
`EndTransactionRecord` take effect together at the end, and not at all after an
`AbortTransactionRecord`, as Kafka applies them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from zkcdc.capture.kraft.metadata_records import ControlRecord, MetadataRecord

NO_LEADER_CHANGE = -2
TOPIC, BROKER = 2, 4  # ConfigResource.Type


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: str
    endpoints: tuple[tuple[str, str, int, int], ...]  # (listener, host, port, protocol)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    registered_ms: int
    migrating_zk_broker: bool = False


@dataclass(frozen=True)
class Partition:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing: tuple[int, ...]
    adding: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int
    elr: tuple[int, ...] | None
    last_known_elr: tuple[int, ...] | None
    controller_epoch: int  # the Raft epoch of the controller that wrote its last change


@dataclass(frozen=True)
class Quorum:
    leader: int  # -1: none known yet
    epoch: int
    voters: tuple[int, ...]
    since_ms: int


@dataclass
class MetadataImage:
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controllers: dict[int, dict[str, Any]] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)  # topic id -> name
    topic_ids: dict[str, str] = field(default_factory=dict)  # name -> topic id
    partitions: dict[str, dict[int, Partition]] = field(default_factory=dict)  # by topic id
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    quorum: Quorum = field(default_factory=lambda: Quorum(-1, 0, (), 0))
    migration_state: int | None = None
    # Added to Raft epochs where the tree shows ZooKeeper's controller epochs: 0, except on a
    # cluster migrated from ZooKeeper whose stream a KRaft capture took over, where ZooKeeper's
    # epoch was ahead of the Raft one (an epoch that went back would be a zombie controller).
    epoch_base: int = 0
    _pending: list[MetadataRecord] | None = None  # an open transaction's records

    # ---- applying ----------------------------------------------------------------------
    def apply(self, entry: MetadataRecord | ControlRecord) -> set[Key]:
        if isinstance(entry, ControlRecord):
            return self._control(entry)
        name = entry.name
        if name == "BeginTransactionRecord":
            self._pending = []
            return set()
        if name == "EndTransactionRecord":
            pending, self._pending = self._pending or [], None
            changed: set[Key] = set()
            for record in pending:
                changed |= self._metadata(record)
            return changed
        if name == "AbortTransactionRecord":
            self._pending = None
            return set()
        if self._pending is not None:
            self._pending.append(entry)
            return set()
        return self._metadata(entry)

    def _control(self, entry: ControlRecord) -> set[Key]:
        if entry.name != "LeaderChangeMessage":
            return set()
        voters = tuple(sorted(v["VoterId"] for v in entry.fields["Voters"]))
        self.quorum = Quorum(entry.fields["LeaderId"], entry.epoch, voters, entry.timestamp_ms)
        return {("controller",), ("quorum",)}

    def _metadata(self, r: MetadataRecord) -> set[Key]:
        handler = _HANDLERS.get(r.name)
        return set() if handler is None else handler(self, r)

    def _register_broker(self, r: MetadataRecord) -> set[Key]:
        f = r.fields
        endpoints = tuple(
            (e["Name"], e["Host"], e["Port"], e["SecurityProtocol"]) for e in f["EndPoints"]
        )
        self.brokers[f["BrokerId"]] = BrokerRegistration(
            broker_id=f["BrokerId"],
            epoch=f["BrokerEpoch"],
            incarnation_id=f["IncarnationId"],
            endpoints=endpoints,
            rack=f["Rack"],
            fenced=f["Fenced"],
            in_controlled_shutdown=f["InControlledShutdown"],
            registered_ms=r.timestamp_ms,
            migrating_zk_broker=f["IsMigratingZkBroker"],
        )
        return {("broker", f["BrokerId"])}

    def _unregister_broker(self, r: MetadataRecord) -> set[Key]:
        self.brokers.pop(r.fields["BrokerId"], None)
        return {("broker", r.fields["BrokerId"])}

    def _broker_change(self, r: MetadataRecord) -> set[Key]:
        f = r.fields
        known = self.brokers.get(f["BrokerId"])
        if known is None:
            return set()
        fenced = {1: True, -1: False}.get(f["Fenced"], known.fenced)
        shutdown = known.in_controlled_shutdown or f["InControlledShutdown"] == 1
        if fenced is False and known.fenced:
            shutdown = False  # a broker unfenced again has come back
        self.brokers[known.broker_id] = dataclasses.replace(
            known, fenced=fenced, in_controlled_shutdown=shutdown
        )
        return {("broker", known.broker_id)}

    def _fence(self, r: MetadataRecord, fenced: bool) -> set[Key]:
        known = self.brokers.get(r.fields["Id"])
        if known is None:
            return set()
        self.brokers[known.broker_id] = dataclasses.replace(
            known, fenced=fenced, in_controlled_shutdown=known.in_controlled_shutdown and fenced
        )
        return {("broker", known.broker_id)}

    def _register_controller(self, r: MetadataRecord) -> set[Key]:
        self.controllers[r.fields["ControllerId"]] = r.fields
        return {("controller_registration", r.fields["ControllerId"])}

    def _topic(self, r: MetadataRecord) -> set[Key]:
        topic_id, name = r.fields["TopicId"], r.fields["Name"]
        self.topic_names[topic_id] = name
        self.topic_ids[name] = topic_id
        self.partitions[topic_id] = {}
        return {("topic", name)}

    def _remove_topic(self, r: MetadataRecord) -> set[Key]:
        topic_id = r.fields["TopicId"]
        name = self.topic_names.pop(topic_id, None)
        gone = self.partitions.pop(topic_id, {})
        if name is None:
            return set()
        self.topic_ids.pop(name, None)
        changed: set[Key] = {("topic", name)}
        changed |= {("partition", name, p) for p in gone}
        if self.configs.pop((TOPIC, name), None) is not None:
            changed.add(("config", TOPIC, name))
        return changed

    def _partition(self, r: MetadataRecord) -> set[Key]:
        f = r.fields
        name = self.topic_names.get(f["TopicId"])
        if name is None:
            return set()
        self.partitions[f["TopicId"]][f["PartitionId"]] = Partition(
            replicas=tuple(f["Replicas"]),
            isr=tuple(f["Isr"]),
            removing=tuple(f["RemovingReplicas"]),
            adding=tuple(f["AddingReplicas"]),
            leader=f["Leader"],
            leader_epoch=f["LeaderEpoch"],
            partition_epoch=f["PartitionEpoch"],
            leader_recovery_state=f["LeaderRecoveryState"],
            elr=_ids(f["EligibleLeaderReplicas"]),
            last_known_elr=_ids(f["LastKnownElr"]),
            controller_epoch=r.epoch,
        )
        return {("topic", name), ("partition", name, f["PartitionId"])}

    def _partition_change(self, r: MetadataRecord) -> set[Key]:
        """Kafka's `PartitionRegistration.merge`: a field not written keeps its value; a leader
        written (even the same one) bumps the leader epoch; every change bumps the partition
        epoch."""
        f = r.fields
        name = self.topic_names.get(f["TopicId"])
        known = self.partitions.get(f["TopicId"], {}).get(f["PartitionId"])
        if name is None or known is None:
            return set()
        leader, leader_epoch = known.leader, known.leader_epoch
        if f["Leader"] != NO_LEADER_CHANGE:
            leader, leader_epoch = f["Leader"], known.leader_epoch + 1
        recovery = known.leader_recovery_state
        if f["LeaderRecoveryState"] != -1:
            recovery = f["LeaderRecoveryState"]
        changed = Partition(
            replicas=_keep(f["Replicas"], known.replicas),
            isr=_keep(f["Isr"], known.isr),
            removing=_keep(f["RemovingReplicas"], known.removing),
            adding=_keep(f["AddingReplicas"], known.adding),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=known.partition_epoch + 1,
            leader_recovery_state=recovery,
            elr=known.elr if f["EligibleLeaderReplicas"] is None else tuple(f["EligibleLeaderReplicas"]),
            last_known_elr=known.last_known_elr if f["LastKnownElr"] is None else tuple(f["LastKnownElr"]),
            controller_epoch=r.epoch,
        )  # fmt: skip
        self.partitions[f["TopicId"]][f["PartitionId"]] = changed
        keys: set[Key] = {("partition", name, f["PartitionId"])}
        if (changed.replicas, changed.adding, changed.removing) != (
            known.replicas,
            known.adding,
            known.removing,
        ):
            keys.add(("topic", name))
        return keys

    def _config(self, r: MetadataRecord) -> set[Key]:
        f = r.fields
        kind, resource = f["ResourceType"], f["ResourceName"]
        if kind not in (TOPIC, BROKER):
            return set()  # logger levels, client metrics, groups: not in ZooKeeper's tree
        values = self.configs.setdefault((kind, resource), {})
        if f["Value"] is None:
            values.pop(f["Name"], None)
        else:
            values[f["Name"]] = f["Value"]
        if not values:
            del self.configs[(kind, resource)]
        return {("config", kind, resource)}

    def _feature(self, r: MetadataRecord) -> set[Key]:
        name, level = r.fields["Name"], r.fields["FeatureLevel"]
        if level == 0:
            self.features.pop(name, None)  # level 0 removes a feature
        else:
            self.features[name] = level
        return {("feature", name)}

    def _migration(self, r: MetadataRecord) -> set[Key]:
        self.migration_state = r.fields["ZkMigrationState"]
        return {("migration",)}

    def _clear_elr(self, r: MetadataRecord) -> set[Key]:
        wanted = r.fields["TopicName"]
        changed: set[Key] = set()
        for topic_id, parts in self.partitions.items():
            name = self.topic_names[topic_id]
            if wanted and name != wanted:
                continue
            for p, known in parts.items():
                if known.elr or known.last_known_elr:
                    parts[p] = dataclasses.replace(known, elr=(), last_known_elr=())
                    changed.add(("partition", name, p))
        return changed


Key = tuple[Any, ...]


def _ids(values: list[int] | None) -> tuple[int, ...] | None:
    return None if values is None else tuple(values)


def _keep(values: list[int] | None, known: tuple[int, ...]) -> tuple[int, ...]:
    return known if values is None else tuple(values)


_HANDLERS = {
    "RegisterBrokerRecord": MetadataImage._register_broker,
    "UnregisterBrokerRecord": MetadataImage._unregister_broker,
    "BrokerRegistrationChangeRecord": MetadataImage._broker_change,
    "FenceBrokerRecord": lambda image, r: image._fence(r, True),
    "UnfenceBrokerRecord": lambda image, r: image._fence(r, False),
    "RegisterControllerRecord": MetadataImage._register_controller,
    "TopicRecord": MetadataImage._topic,
    "RemoveTopicRecord": MetadataImage._remove_topic,
    "PartitionRecord": MetadataImage._partition,
    "PartitionChangeRecord": MetadataImage._partition_change,
    "ConfigRecord": MetadataImage._config,
    "FeatureLevelRecord": MetadataImage._feature,
    "ZkMigrationStateRecord": MetadataImage._migration,
    "ClearElrRecord": MetadataImage._clear_elr,
}
