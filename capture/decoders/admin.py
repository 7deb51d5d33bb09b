"""`/admin/...`: reassignment, preferred-leader election and topic deletion requests.

A request znode appearing is the request; the controller deleting it is the completion."""

from __future__ import annotations

from zkcdc.capture.decoders.json_data import Unparseable, integer, integers, json_object, previous
from zkcdc.capture.records import ClusterEvent, PartitionRef
from zkcdc.ground.change_types import EventType


def partitions(data: bytes | None, with_replicas: bool) -> tuple[PartitionRef, ...]:
    obj = json_object(data)
    entries = obj.get("partitions")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise Unparseable("field 'partitions' is not a list of objects")
    refs = []
    for entry in entries:
        topic = entry.get("topic")
        if not isinstance(topic, str):
            raise Unparseable("a partition entry has no string 'topic'")
        replicas = integers(entry, "replicas") if with_replicas else None
        refs.append(PartitionRef(topic, integer(entry, "partition"), replicas))
    return tuple(refs)


def _request(
    requested: EventType,
    completed: EventType,
    with_replicas: bool,
    before: bytes | None,
    after: bytes | None,
) -> list[ClusterEvent]:
    def parse(data: bytes) -> tuple[PartitionRef, ...]:
        return partitions(data, with_replicas)

    old = previous(parse, before) or ()
    if after is None:
        return [ClusterEvent(type=completed, partitions=old)] if before is not None else []
    new = parse(after)
    # Controllers before 2.4 rewrote the znode without the partitions they had finished.
    new_keys = {(r.topic, r.partition) for r in new}
    old_keys = {(r.topic, r.partition) for r in old}
    done = tuple(r for r in old if (r.topic, r.partition) not in new_keys)
    fresh = tuple(r for r in new if (r.topic, r.partition) not in old_keys)
    events = []
    if done:
        events.append(ClusterEvent(type=completed, partitions=done))
    if fresh:
        events.append(ClusterEvent(type=requested, partitions=fresh))
    return events


def decode_reassignment(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    return _request(
        EventType.REASSIGNMENT_REQUESTED, EventType.REASSIGNMENT_COMPLETED, True, before, after
    )


def decode_preferred_election(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    return _request(
        EventType.PREFERRED_ELECTION_REQUESTED,
        EventType.PREFERRED_ELECTION_COMPLETED,
        False,
        before,
        after,
    )


def decode_topic_deletion(topic: str, existed: bool, exists: bool) -> list[ClusterEvent]:
    """`/admin/delete_topics/T` carries no data: only its existence matters."""
    if exists and not existed:
        return [ClusterEvent(type=EventType.TOPIC_DELETION_REQUESTED, topic=topic, topics=(topic,))]
    if existed and not exists:
        return [ClusterEvent(type=EventType.TOPIC_DELETION_COMPLETED, topic=topic, topics=(topic,))]
    return []
