"""`/brokers/topics/T` (v1-v3): a topic's replica assignment, its reassignment in flight and its id."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zkcdc.capture.decoders.json_data import (
    Unparseable,
    decimal,
    in_range,
    integer,
    json_object,
    previous,
)
from zkcdc.capture.records import ClusterEvent, PartitionRef
from zkcdc.ground.change_types import EventType

Assignment = dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class TopicAssignment:
    partitions: Assignment
    adding: Assignment
    removing: Assignment
    topic_id: str | None

    def target(self, partition: int) -> tuple[int, ...]:
        """Where a reassignment moves the partition: its replicas without those being removed."""
        removing = self.removing.get(partition, ())
        return tuple(b for b in self.partitions[partition] if b not in removing)


def parse(data: bytes | None) -> TopicAssignment:
    obj = json_object(data)
    version = integer(obj, "version", 1)
    if not 1 <= version <= 3:
        raise Unparseable(f"topic assignment version {version} is not known")
    topic_id = obj.get("topic_id")  # v3
    if topic_id is not None and not isinstance(topic_id, str):
        raise Unparseable("field 'topic_id' is not a string")
    return TopicAssignment(
        partitions=_assignment(obj, "partitions", required=True),
        adding=_assignment(obj, "adding_replicas"),  # v2+
        removing=_assignment(obj, "removing_replicas"),
        topic_id=topic_id,
    )


def _assignment(obj: dict[str, Any], key: str, required: bool = False) -> Assignment:
    value = obj.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise Unparseable(f"field {key!r} is not an object of partition -> replicas")
    result: Assignment = {}
    for partition, replicas in value.items():
        if not (partition.isascii() and partition.isdigit()) or not isinstance(replicas, list):
            raise Unparseable(f"field {key!r} has a bad entry {partition!r}")
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in replicas):
            raise Unparseable(f"field {key!r}: replicas of {partition} are not integers")
        for broker in replicas:
            in_range(broker, f"field {key!r}: broker id")
        result[decimal(partition, f"field {key!r}: partition")] = tuple(replicas)
    return result


def _wire(assignment: Assignment) -> dict[str, tuple[int, ...]]:
    return {str(p): replicas for p, replicas in sorted(assignment.items())}


def decode(topic: str, before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    old = previous(parse, before)
    if after is None:
        if before is None:
            return []
        return [
            ClusterEvent(
                type=EventType.TOPIC_DELETED,
                topic=topic,
                topic_id=old.topic_id if old else None,
                assignment=_wire(old.partitions) if old else None,
            )
        ]
    new = parse(after)
    if old is None:
        events = [
            ClusterEvent(
                type=EventType.TOPIC_CREATED,
                topic=topic,
                topic_id=new.topic_id,
                assignment=_wire(new.partitions),
            )
        ]
        return events + _reassignments(topic, TopicAssignment({}, {}, {}, None), new)
    events = []
    added = {p: r for p, r in new.partitions.items() if p not in old.partitions}
    if added:
        events.append(
            ClusterEvent(
                type=EventType.PARTITIONS_ADDED,
                topic=topic,
                topic_id=new.topic_id,
                assignment=_wire(added),
            )
        )
    for partition in sorted(p for p in new.partitions if p in old.partitions):
        key = (
            old.partitions[partition],
            old.adding.get(partition, ()),
            old.removing.get(partition, ()),
        )
        if key != (
            new.partitions[partition],
            new.adding.get(partition, ()),
            new.removing.get(partition, ()),
        ):
            events.append(
                ClusterEvent(
                    type=EventType.REPLICAS_CHANGED,
                    topic=topic,
                    partition=partition,
                    replicas_before=old.partitions[partition],
                    replicas_after=new.partitions[partition],
                    adding=new.adding.get(partition, ()),
                    removing=new.removing.get(partition, ()),
                )
            )
    return events + _reassignments(topic, old, new)


def _reassignments(topic: str, old: TopicAssignment, new: TopicAssignment) -> list[ClusterEvent]:
    """Kafka 2.4+ keeps a reassignment in flight as adding/removing replicas on the topic znode
    (the Admin API writes no `/admin/reassign_partitions`): their appearance is the request,
    their clearing the completion."""

    def moving(t: TopicAssignment) -> set[int]:
        return {p for p in t.partitions if t.adding.get(p) or t.removing.get(p)}

    started = sorted(moving(new) - moving(old))
    finished = sorted(p for p in moving(old) - moving(new) if p in new.partitions)
    events = []
    if started:
        refs = tuple(PartitionRef(topic, p, new.target(p)) for p in started)
        events.append(
            ClusterEvent(type=EventType.REASSIGNMENT_REQUESTED, topic=topic, partitions=refs)
        )
    if finished:
        refs = tuple(PartitionRef(topic, p, new.partitions[p]) for p in finished)
        events.append(
            ClusterEvent(type=EventType.REASSIGNMENT_COMPLETED, topic=topic, partitions=refs)
        )
    return events
