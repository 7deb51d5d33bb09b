"""Broker registrations v1-v5, `/controller` v1-v2 and `/controller_epoch` decode to contract events."""

from __future__ import annotations

import pytest

from zkcdc.capture.decoders import brokers, controller
from zkcdc.capture.decoders.json_data import Unparseable
from zkcdc.capture.records import Znode
from zkcdc.ground.change_types import EventType

V1 = b'{"jmx_port":-1,"timestamp":"1525741823119","version":1,"host":"hadoop1","port":9092}'
V3 = (
    b'{"jmx_port":-1,"timestamp":"1","endpoints":["PLAINTEXT://h1:9092"],'
    b'"rack":"r1","host":"h1","version":3,"port":9092}'
)
V5 = (
    b'{"features":{},"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://h2:9093"],'
    b'"jmx_port":-1,"port":-1,"host":null,"version":5,"timestamp":"1700000000000"}'
)


def znode(data: bytes, czxid: int = 100) -> Znode:
    return Znode(data, version=0, czxid=czxid, mzxid=czxid, ephemeral_owner=0x77)


@pytest.mark.parametrize(
    ("data", "host", "port", "endpoints", "rack"),
    [
        (V1, "hadoop1", 9092, (), None),
        (V3, "h1", 9092, ("PLAINTEXT://h1:9092",), "r1"),
        (V5, None, -1, ("SSL://h2:9093",), None),
    ],
)
def test_a_new_registration_of_any_version_is_broker_registered(data, host, port, endpoints, rack):
    (event,) = brokers.decode(3, None, znode(data))
    assert event.type is EventType.BROKER_REGISTERED
    assert (event.broker_id, event.broker_epoch) == (3, 100)
    assert (event.host, event.port, event.endpoints, event.rack) == (host, port, endpoints, rack)


def test_a_vanished_registration_is_broker_deregistered():
    (event,) = brokers.decode(3, znode(V3), None)
    assert (event.type, event.broker_id, event.broker_epoch) == (
        EventType.BROKER_DEREGISTERED,
        3,
        100,
    )


def test_a_new_czxid_between_reads_is_a_restart():
    events = brokers.decode(3, znode(V3, czxid=100), znode(V3, czxid=200))
    assert [(e.type, e.broker_epoch) for e in events] == [
        (EventType.BROKER_DEREGISTERED, 100),
        (EventType.BROKER_REGISTERED, 200),
    ]


def test_new_data_under_the_same_czxid_is_an_update():
    (event,) = brokers.decode(3, znode(V1), znode(V3))
    assert (event.type, event.rack) == (EventType.BROKER_UPDATED, "r1")


def test_an_unknown_registration_version_is_unparseable():
    with pytest.raises(Unparseable, match="version 6"):
        brokers.decode(3, None, znode(b'{"version":6}'))


def test_controller_failover_is_resigned_then_elected():
    v1 = b'{"version":1,"brokerid":0,"timestamp":"1525741822769"}'
    v2 = b'{"version":2,"brokerid":2,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    (elected,) = controller.decode_controller(None, v1)
    assert (elected.type, elected.broker_id, elected.broker_id_before) == (
        EventType.CONTROLLER_ELECTED,
        0,
        None,
    )
    (resigned,) = controller.decode_controller(v1, None)
    assert (resigned.type, resigned.broker_id) == (EventType.CONTROLLER_RESIGNED, 0)
    resigned, elected = controller.decode_controller(v1, v2)
    assert resigned.type is EventType.CONTROLLER_RESIGNED
    assert (elected.type, elected.broker_id, elected.broker_id_before) == (
        EventType.CONTROLLER_ELECTED,
        2,
        0,
    )


def test_controller_epoch_is_a_bare_integer():
    (event,) = controller.decode_epoch(b"1", b"2")
    assert (event.type, event.epoch_before, event.epoch_after) == (
        EventType.CONTROLLER_EPOCH_CHANGED,
        1,
        2,
    )
    (first,) = controller.decode_epoch(None, b"1")
    assert (first.epoch_before, first.epoch_after) == (None, 1)
    assert controller.decode_epoch(b"2", b"2") == []
    with pytest.raises(Unparseable, match="not an integer"):
        controller.decode_epoch(None, b'{"epoch":1}')


def _migration_znode(offset: int, epoch: int = 1) -> bytes:
    return (
        b'{"version":0,"kraft_controller_id":101,"kraft_controller_epoch":%d,'
        b'"kraft_metadata_offset":%d,"kraft_metadata_epoch":%d}' % (epoch, offset, epoch)
    )


def test_the_migration_znode_names_each_phase_of_a_zookeeper_to_kraft_migration() -> None:
    from zkcdc.capture.decoders import router

    claimed = _migration_znode(-1)
    migrated = _migration_znode(345)
    dual_write = _migration_znode(512, epoch=2)
    phases = [
        [(e.migration_state_before, e.migration_state_after) for e in router.decode(
            "/migration", None if b is None else znode(b), None if a is None else znode(a))]
        for b, a in [(None, claimed), (claimed, migrated), (migrated, dual_write)]
    ]  # fmt: skip
    assert phases == [[(None, "PRE_MIGRATION")], [("PRE_MIGRATION", "MIGRATION")], []]
    assert [e.type for e in router.decode("/migration", None, znode(claimed))] == [
        EventType.MIGRATION_STATE_CHANGED
    ]


def test_a_controller_znode_of_a_kraft_controller_is_a_controller_election() -> None:
    v2 = b'{"version":2,"brokerid":101,"timestamp":"1700000000000","kraftControllerEpoch":3}'
    v1 = b'{"version":1,"brokerid":2,"timestamp":"1700000000000"}'
    events = controller.decode_controller(v1, v2)
    assert [(e.type, e.broker_id) for e in events] == [
        (EventType.CONTROLLER_RESIGNED, 2), (EventType.CONTROLLER_ELECTED, 101)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "data",
    [b'{"version":1,"kraft_controller_id":1,"kraft_metadata_offset":1}',
     b'{"version":0,"kraft_metadata_offset":1}', b'{"version":0,"kraft_controller_id":1}', b"[]"],
)  # fmt: skip
def test_a_migration_znode_not_in_kafka_s_format_is_unparseable(data: bytes) -> None:
    from zkcdc.capture.decoders import router

    events = router.decode("/migration", None, znode(data))
    assert [e.type for e in events] == [EventType.UNPARSEABLE]


def test_a_kraft_controller_s_election_carries_its_epoch_and_states_are_checked_against_it() -> (
    None
):
    """During a migration partition states carry the KRaft controller's epoch (1), not
    /controller_epoch's (4): no controller_epoch_regression for them."""
    from zkcdc.streaming.rules.alert_engine import AlertEngine

    v2 = b'{"version":2,"brokerid":101,"timestamp":"1700000000000","kraftControllerEpoch":1}'
    [elected] = controller.decode_controller(None, v2)
    assert elected.epoch_after == 1
    assert (
        controller.decode_controller(None, b'{"version":1,"brokerid":1,"timestamp":"1"}')[
            0
        ].epoch_after
        is None
    )

    def record(seq: int, events: list[dict[str, object]]) -> dict[str, object]:
        return {"seq": seq, "op": "UPDATE", "ts_ms": 1000 + seq, "events": events}

    def isr_shrunk(epoch: int) -> dict[str, object]:
        return {"type": EventType.ISR_SHRUNK, "topic": "t", "partition": 0, "leader": 1,
                "isr_before": [1, 2], "isr_after": [1], "removed": [2],
                "controller_epoch": epoch}  # fmt: skip

    engine = AlertEngine("c")
    engine.process(record(1, [{"type": EventType.CONTROLLER_EPOCH_CHANGED, "epoch_before": 3,
                               "epoch_after": 4}]))  # fmt: skip
    engine.process(record(2, [{"type": EventType.CONTROLLER_ELECTED, "broker_id": 101,
                               "broker_id_before": None, "epoch_after": 1}]))  # fmt: skip
    alerts = engine.process(record(3, [isr_shrunk(1)]))
    assert "controller_epoch_regression" not in {a.rule for a in alerts}
    # A ZooKeeper controller again: a state written with an old epoch is a zombie's.
    engine.process(record(4, [{"type": EventType.CONTROLLER_ELECTED, "broker_id": 2,
                               "broker_id_before": 101, "epoch_after": None}]))  # fmt: skip
    alerts = engine.process(record(5, [isr_shrunk(1)]))
    assert "controller_epoch_regression" in {a.rule for a in alerts}
