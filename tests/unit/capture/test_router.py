"""Every znode path reaches its decoder; bad bytes and foreign paths become events, not crashes."""

from __future__ import annotations

import pytest

from zkcdc.capture.decoders import router
from zkcdc.capture.records import Znode
from zkcdc.ground.change_types import EventType

STATE = b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":0,"isr":[3,0,1]}'


def z(data: bytes | None) -> Znode:
    return Znode(data, version=0, czxid=5, mzxid=5)


@pytest.mark.parametrize(
    ("path", "data", "expected"),
    [
        ("/brokers/topics/t/partitions/0/state", STATE, EventType.PARTITION_STATE_CREATED),
        ("/brokers/topics/t", b'{"version":1,"partitions":{"0":[1]}}', EventType.TOPIC_CREATED),
        ("/brokers/ids/3", b'{"version":1,"host":"h","port":1}', EventType.BROKER_REGISTERED),
        (
            "/controller",
            b'{"version":2,"brokerid":1,"timestamp":"1"}',
            EventType.CONTROLLER_ELECTED,
        ),
        ("/controller_epoch", b"7", EventType.CONTROLLER_EPOCH_CHANGED),
        ("/admin/delete_topics/t", None, EventType.TOPIC_DELETION_REQUESTED),
        ("/config/topics/t", b'{"version":1,"config":{"a":"b"}}', EventType.CONFIG_CHANGED),
        ("/consumers/g/offsets/t/0", b"9", EventType.OFFSET_COMMITTED),
        ("/consumers/g/owners/t/0", b"g_c-0", EventType.PARTITION_OWNER_CHANGED),
        (
            "/log_dir_event_notification/log_dir_event_0000000001",
            b'{"version":1,"broker":1,"event":1}',
            EventType.LOG_DIR_FAILED,
        ),
        ("/my-app/lock", b"x", EventType.UNKNOWN_ZNODE),
    ],
)
def test_each_path_kind_reaches_its_decoder(path, data, expected):
    (event,) = router.decode(path, None, z(data))
    assert event.type is expected


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/brokers",
        "/brokers/topics/t/partitions",
        "/brokers/topics/t/partitions/0",
        "/brokers/seqid",
        "/cluster/id",
        "/config/changes/config_change_0000000003",
        "/consumers/g/ids",
        "/feature",
    ],
)
def test_known_structural_znodes_have_no_events(path):
    assert router.decode(path, None, z(b'{"version":1}')) == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"leader":3,', "malformed JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"[1,2]", "expected a JSON object"),
        (
            b'{"version":1,"leader":"three","leader_epoch":0,"isr":[],"controller_epoch":1}',
            "leader",
        ),
        (b"{" + b" " * (1024 * 1024) + b"}", "more than"),
    ],
)
def test_garbage_in_a_state_znode_is_unparseable_naming_the_partition(data, reason):
    (event,) = router.decode("/brokers/topics/t/partitions/4/state", z(STATE), z(data))
    assert event.type is EventType.UNPARSEABLE
    assert reason in event.reason
    assert (event.topic, event.partition) == ("t", 4)
