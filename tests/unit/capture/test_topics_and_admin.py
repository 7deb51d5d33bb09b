"""Topic assignments v1-v3 and the `/admin` requests decode to the contract's events."""

from __future__ import annotations

import pytest

from zkcdc.capture.decoders import admin, topics
from zkcdc.capture.decoders.json_data import Unparseable
from zkcdc.capture.records import PartitionRef
from zkcdc.ground.change_types import EventType

V1 = b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}'
V3 = (
    b'{"removing_replicas":{},"partitions":{"0":[1,2],"1":[2,3]},'
    b'"topic_id":"p7Lx3JhsT1Kse1sAJY6PBg","adding_replicas":{},"version":3}'
)
V3_MOVING = (
    b'{"removing_replicas":{"0":[1]},"partitions":{"0":[1,2,3],"1":[2,3]},'
    b'"topic_id":"p7Lx3JhsT1Kse1sAJY6PBg","adding_replicas":{"0":[3]},"version":3}'
)
V3_MOVED = (
    b'{"removing_replicas":{},"partitions":{"0":[2,3],"1":[2,3]},'
    b'"topic_id":"p7Lx3JhsT1Kse1sAJY6PBg","adding_replicas":{},"version":3}'
)


@pytest.mark.parametrize(("data", "topic_id"), [(V1, None), (V3, "p7Lx3JhsT1Kse1sAJY6PBg")])
def test_a_new_topic_znode_of_any_version_is_topic_created(data, topic_id):
    (event,) = topics.decode("orders", None, data)
    assert (event.type, event.topic, event.topic_id) == (
        EventType.TOPIC_CREATED,
        "orders",
        topic_id,
    )
    assert event.assignment == {"0": (1, 2), "1": (2, 3)}


def test_more_partitions_are_partitions_added_with_only_the_new_ones():
    grown = b'{"version":3,"topic_id":"x","partitions":{"0":[1,2],"1":[2,3],"2":[3,1]}}'
    (event,) = topics.decode("orders", V3, grown)
    assert (event.type, event.assignment) == (EventType.PARTITIONS_ADDED, {"2": (3, 1)})


def test_a_reassignment_in_flight_is_replicas_changed_and_requested_then_completed():
    started = topics.decode("orders", V3, V3_MOVING)
    assert [e.type for e in started] == [
        EventType.REPLICAS_CHANGED,
        EventType.REASSIGNMENT_REQUESTED,
    ]
    changed, requested = started
    assert (changed.partition, changed.replicas_before, changed.replicas_after) == (
        0,
        (1, 2),
        (1, 2, 3),
    )
    assert (changed.adding, changed.removing) == ((3,), (1,))
    assert requested.partitions == (PartitionRef("orders", 0, (2, 3)),)

    finished = topics.decode("orders", V3_MOVING, V3_MOVED)
    assert [e.type for e in finished] == [
        EventType.REPLICAS_CHANGED,
        EventType.REASSIGNMENT_COMPLETED,
    ]
    assert finished[0].replicas_after == (2, 3)
    assert finished[1].partitions == (PartitionRef("orders", 0, (2, 3)),)


def test_a_vanished_topic_znode_is_topic_deleted_with_its_id():
    (event,) = topics.decode("orders", V3, None)
    assert (event.type, event.topic_id) == (EventType.TOPIC_DELETED, "p7Lx3JhsT1Kse1sAJY6PBg")


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":4,"partitions":{}}',
        b'{"version":1,"partitions":{"zero":[1]}}',
        b'{"version":1,"partitions":{"0":["1"]}}',
        b'{"version":1}',
    ],
)
def test_topic_znodes_kafka_never_writes_are_unparseable(data):
    with pytest.raises(Unparseable):
        topics.decode("orders", None, data)


REASSIGN = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},{"topic":"t","partition":1,"replicas":[2,3]}]}'


def test_a_legacy_reassignment_request_and_its_removal_by_the_controller():
    (requested,) = admin.decode_reassignment(None, REASSIGN)
    assert requested.type is EventType.REASSIGNMENT_REQUESTED
    assert requested.partitions == (PartitionRef("t", 0, (1, 2)), PartitionRef("t", 1, (2, 3)))
    (completed,) = admin.decode_reassignment(REASSIGN, None)
    assert completed.type is EventType.REASSIGNMENT_COMPLETED
    assert completed.partitions == requested.partitions


def test_an_old_controller_shrinking_the_request_completes_the_dropped_partitions():
    rest = b'{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[2,3]}]}'
    (completed,) = admin.decode_reassignment(REASSIGN, rest)
    assert completed.type is EventType.REASSIGNMENT_COMPLETED
    assert completed.partitions == (PartitionRef("t", 0, (1, 2)),)


def test_preferred_election_requests_carry_partitions_without_replicas():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":2}]}'
    (requested,) = admin.decode_preferred_election(None, data)
    assert (requested.type, requested.partitions) == (
        EventType.PREFERRED_ELECTION_REQUESTED,
        (PartitionRef("t", 2, None),),
    )
    (completed,) = admin.decode_preferred_election(data, None)
    assert completed.type is EventType.PREFERRED_ELECTION_COMPLETED


def test_topic_deletion_is_requested_by_the_znode_and_completed_by_its_removal():
    (requested,) = admin.decode_topic_deletion("t", existed=False, exists=True)
    (completed,) = admin.decode_topic_deletion("t", existed=True, exists=False)
    assert (requested.type, requested.topic, requested.topics) == (
        EventType.TOPIC_DELETION_REQUESTED,
        "t",
        ("t",),
    )
    assert completed.type is EventType.TOPIC_DELETION_COMPLETED
    assert admin.decode_topic_deletion("t", existed=True, exists=True) == []
