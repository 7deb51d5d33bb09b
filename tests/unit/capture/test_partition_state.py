"""Partition-state znodes (v1) decode to the leader, ISR and epoch events of the contract."""

from __future__ import annotations

import json

import pytest

from zkcdc.capture.decoders import partition_state
from zkcdc.capture.decoders.json_data import Unparseable
from zkcdc.ground.change_types import EventType


def state(leader: int, isr: list[int], leader_epoch: int = 0, controller_epoch: int = 1) -> bytes:
    return json.dumps(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": isr,
        }
    ).encode()


def decode(before: bytes | None, after: bytes | None):
    return partition_state.decode("t", 0, before, after)


def test_the_seed_example_is_a_created_state():
    (event,) = decode(
        None, b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":0,"isr":[3,0,1]}'
    )
    assert event.type is EventType.PARTITION_STATE_CREATED
    assert (event.topic, event.partition, event.leader, event.isr) == ("t", 0, 3, (3, 0, 1))
    assert (event.leader_epoch, event.controller_epoch) == (0, 1)


def test_a_follower_leaving_is_an_isr_shrink_with_exact_before_and_after():
    (event,) = decode(state(1, [1, 2, 3]), state(1, [1, 3]))
    assert event.type is EventType.ISR_SHRUNK
    assert (event.isr_before, event.isr_after, event.removed, event.leader) == (
        (1, 2, 3),
        (1, 3),
        (2,),
        1,
    )


def test_a_follower_returning_is_an_isr_expansion():
    (event,) = decode(state(1, [1, 3]), state(1, [1, 3, 2]))
    assert event.type is EventType.ISR_EXPANDED
    assert event.added == (2,)


def test_a_leader_move_inside_the_isr_is_clean_and_shrinks_the_isr():
    events = decode(state(1, [1, 2, 3], 4), state(2, [2, 3], 5))
    assert [e.type for e in events] == [EventType.LEADER_CHANGED, EventType.ISR_SHRUNK]
    change = events[0]
    assert (change.leader_before, change.leader_after, change.clean) == (1, 2, True)
    assert (change.leader_epoch_before, change.leader_epoch_after) == (4, 5)


def test_a_leader_from_outside_the_isr_is_unclean():
    change, shrunk, expanded = decode(state(-1, [1], 5), state(3, [3], 6))
    assert change.type is EventType.LEADER_CHANGED
    assert (change.leader_before, change.leader_after, change.clean) == (-1, 3, False)
    assert (shrunk.type, shrunk.removed) == (EventType.ISR_SHRUNK, (1,))
    assert (expanded.type, expanded.added) == (EventType.ISR_EXPANDED, (3,))


def test_losing_the_last_leader_is_offline():
    events = decode(state(1, [1], 5), state(-1, [1], 6))
    assert [e.type for e in events] == [EventType.LEADER_CHANGED, EventType.PARTITION_OFFLINE]
    assert events[1].leader_before == 1


def test_a_same_leader_epoch_bump_is_reported_alone():
    (event,) = decode(state(1, [1, 2], 4), state(1, [1, 2], 5))
    assert event.type is EventType.LEADER_EPOCH_BUMPED
    assert (event.leader, event.leader_epoch_before, event.leader_epoch_after) == (1, 4, 5)


def test_a_rewrite_that_changes_only_the_controller_epoch_is_reported_with_both_epochs():
    (event,) = decode(state(1, [1, 2], 4, controller_epoch=1), state(1, [1, 2], 4, 2))
    assert event.type is EventType.PARTITION_STATE_REWRITTEN
    assert (event.leader, event.isr_after, event.controller_epoch, event.epoch_before) == (
        1, (1, 2), 2, 1,
    )  # fmt: skip


def test_a_change_of_more_than_the_controller_epoch_is_not_also_a_rewrite():
    events = decode(state(1, [1, 2], 4, controller_epoch=1), state(1, [1], 4, 2))
    assert [(e.type, e.controller_epoch) for e in events] == [(EventType.ISR_SHRUNK, 2)]


def test_an_unchanged_state_has_no_events_and_a_deleted_one_none_either():
    assert decode(state(1, [1, 2]), state(1, [1, 2])) == []
    assert decode(state(1, [1, 2]), None) == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b'{"leader": 1', "malformed JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (
            b'{"version":1,"leader":"1","isr":[1],"leader_epoch":0,"controller_epoch":1}',
            "'leader' is str",
        ),
        (
            b'{"version":1,"leader":1,"isr":[true],"leader_epoch":0,"controller_epoch":1}',
            "'isr' is not a list",
        ),
        (b'{"version":2,"leader":1,"isr":[1],"leader_epoch":0,"controller_epoch":1}', "version 2"),
        (b" " * (1024 * 1024 + 1), "more than the"),
    ],
)
def test_what_kafka_does_not_write_is_unparseable_with_a_reason(data: bytes, reason: str):
    with pytest.raises(Unparseable, match=reason):
        decode(None, data)
