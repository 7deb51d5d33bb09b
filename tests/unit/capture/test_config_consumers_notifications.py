"""Config overrides, the seed documents' legacy `/consumers` formats and broker notifications."""

from __future__ import annotations

import pytest

from zkcdc.capture.decoders import config, consumers, notifications
from zkcdc.capture.decoders.json_data import Unparseable
from zkcdc.capture.records import PartitionRef
from zkcdc.ground.change_types import EventType

# The seed documents' example registration (with the article's missing comma restored).
REGISTRATION = (
    b'{"version": 1,"subscription": {"open_platform_opt_push_plus1": 5},'
    b'"pattern": "static","timestamp": "1411294187842"}'
)
OWNER = b"console-consumer-2304_hadoop2-1525747915241-6b48ff32-0"


def test_a_config_override_names_exactly_the_keys_that_changed():
    before = b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"delete"}}'
    after = b'{"version":1,"config":{"retention.ms":"2000","cleanup.policy":"delete","min.insync.replicas":"2"}}'
    (event,) = config.decode("topics", "orders", before, after)
    assert (event.type, event.entity_type, event.entity_name, event.topic) == (
        EventType.CONFIG_CHANGED,
        "topics",
        "orders",
        "orders",
    )
    assert event.changed_keys == ("min.insync.replicas", "retention.ms")
    assert event.config_after["min.insync.replicas"] == "2"


def test_a_first_config_znode_changes_all_its_keys_and_an_unchanged_rewrite_nothing():
    data = b'{"version":1,"config":{"a":"1"}}'
    (event,) = config.decode("brokers", "2", None, data)
    assert (event.broker_id, event.config_before, event.changed_keys) == (2, None, ("a",))
    assert config.decode("brokers", "2", data, data) == []


def test_the_seed_registration_is_consumer_registered_and_its_removal_deregistered():
    (event,) = consumers.decode_registration("g", "g_c1", None, REGISTRATION)
    assert (event.type, event.group, event.consumer_id) == (
        EventType.CONSUMER_REGISTERED,
        "g",
        "g_c1",
    )
    assert (event.subscription, event.pattern) == ({"open_platform_opt_push_plus1": 5}, "static")
    (gone,) = consumers.decode_registration("g", "g_c1", REGISTRATION, None)
    assert gone.type is EventType.CONSUMER_DEREGISTERED
    assert gone.subscription == {"open_platform_opt_push_plus1": 5}


def test_an_owner_moving_between_threads_is_partition_owner_changed():
    (taken,) = consumers.decode_owner("g", "t", 3, None, OWNER)
    assert (taken.owner_before, taken.owner_after, taken.partition) == (None, OWNER.decode(), 3)
    (moved,) = consumers.decode_owner("g", "t", 3, OWNER, b"g_other-1")
    assert (moved.owner_before, moved.owner_after) == (OWNER.decode(), "g_other-1")
    (released,) = consumers.decode_owner("g", "t", 3, b"g_other-1", None)
    assert released.owner_after is None


def test_offsets_are_bare_longs_and_a_commit_carries_before_and_after():
    (event,) = consumers.decode_offset("g", "t", 0, b"42", b"57")
    assert (event.type, event.offset_before, event.offset_after) == (
        EventType.OFFSET_COMMITTED,
        42,
        57,
    )
    with pytest.raises(Unparseable):
        consumers.decode_offset("g", "t", 0, None, b"forty")


def test_an_isr_change_notification_lists_its_partitions_once():
    data = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":4}]}'
    (event,) = notifications.decode_isr_change(None, data)
    assert event.partitions == (PartitionRef("t", 0), PartitionRef("t", 4))
    assert notifications.decode_isr_change(data, None) == []


def test_a_log_dir_failure_names_its_broker():
    (event,) = notifications.decode_log_dir_event(None, b'{"version":1,"broker":2,"event":1}')
    assert (event.type, event.broker_id) == (EventType.LOG_DIR_FAILED, 2)
