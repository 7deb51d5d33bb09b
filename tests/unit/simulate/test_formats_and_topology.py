"""The simulator's pure parts: Kafka's bytes, Kafka's replica placement, the controller's state
transitions and the expectation file."""

from __future__ import annotations

import json
import random

import pytest

from zkcdc.capture.decoders import brokers, controller, partition_state, topics
from zkcdc.capture.records import Znode
from zkcdc.ground.change_types import EventType
from zkcdc.simulate import formats
from zkcdc.simulate import partition_logic as logic
from zkcdc.simulate.errors import SimulateError
from zkcdc.simulate.expectation import Expectation
from zkcdc.simulate.partition_logic import PartitionState
from zkcdc.simulate.topology import ClusterShape, assign_replicas


def test_bytes_equal_what_a_real_kafka_3_9_cluster_wrote():
    # Copied from the local stack's tree (Kafka 3.9.2).
    assert formats.partition_state(2, 0, [2, 3, 1], 1) == (
        b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,3,1]}'
    )
    assert formats.broker_registration(1, "127.0.0.1", 9092, 1795298783803) == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"127.0.0.1","version":5,"timestamp":"1795298783803"}'
    )
    assert formats.topic_assignment(
        {0: [2, 3, 1], 1: [3, 1, 2], 2: [1, 2, 3]}, "gf1Ilp-DQiCyIfogDU5kcw"
    ) == (
        b'{"partitions":{"0":[2,3,1],"1":[3,1,2],"2":[1,2,3]},"topic_id":"gf1Ilp-DQiCyIfogDU5kcw",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert formats.controller(2, 1795298784112) == (
        b'{"version":2,"brokerid":2,"timestamp":"1795298784112","kraftControllerEpoch":-1}'
    )
    assert formats.cluster_id("kOFXM5bVRpKBtC3WN4Hplw") == (
        b'{"version":"1","id":"kOFXM5bVRpKBtC3WN4Hplw"}'
    )
    assert formats.feature() == b'{"features":{},"version":2,"status":1}'
    assert formats.entity_config({"retention.ms": "2000000"}) == (
        b'{"version":1,"config":{"retention.ms":"2000000"}}'
    )
    assert formats.config_change("topics", "parity") == (
        b'{"version":2,"entity_path":"topics/parity"}'
    )


def test_capture_decodes_every_format_the_simulator_writes():
    reg = formats.broker_registration(4, "h", 9092, 1)
    assert brokers.decode(4, None, Znode(reg, czxid=10))[0].type == EventType.BROKER_REGISTERED
    assert controller.decode_controller(None, formats.controller(4, 1))[0].broker_id == 4
    topic = formats.topic_assignment({0: [1, 2]}, formats.kafka_uuid(random.Random(1)))
    assert topics.decode("t", None, topic)[0].type == EventType.TOPIC_CREATED
    state = formats.partition_state(1, 0, [1, 2], 1)
    assert partition_state.decode("t", 0, None, state)[0].isr == (1, 2)


def test_kafka_uuids_are_22_url_safe_characters():
    ids = {formats.kafka_uuid(random.Random(seed)) for seed in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 22 and "=" not in i and "+" not in i and "/" not in i for i in ids)


class _Fixed(random.Random):
    def randrange(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        return 0


def test_replicas_are_placed_as_kafkas_rack_unaware_assignment_documents():
    # AdminUtils' own example: 5 brokers, 10 partitions, 3 replicas, start index and shift 0.
    placed = assign_replicas([0, 1, 2, 3, 4], 10, 3, _Fixed())
    assert placed[0] == (0, 1, 2)
    assert placed[4] == (4, 0, 1)
    assert placed[5] == (0, 2, 3)  # the round wrapped: the followers shift by one more
    assert placed[9] == (4, 1, 2)


def test_placement_spreads_leaders_evenly_and_never_repeats_a_broker():
    placed = assign_replicas([1, 2, 3, 4, 5, 6], 600, 3, random.Random(7))
    leaders = [r[0] for r in placed.values()]
    assert {leaders.count(b) for b in range(1, 7)} == {100}
    assert all(len(set(r)) == 3 for r in placed.values())


def test_a_shape_with_more_replicas_than_brokers_is_refused():
    with pytest.raises(SimulateError, match=r"replication-factor 4 needs 1\.\.3"):
        ClusterShape(brokers=3, replication_factor=4)


def test_a_dead_leader_moves_to_the_first_live_in_sync_replica_with_a_new_epoch():
    state = PartitionState(leader=2, leader_epoch=4, isr=(2, 3, 1), controller_epoch=1)
    after = logic.after_broker_failure([2, 3, 1], state, dead=2, live={1, 3}, epoch=5)
    assert after == PartitionState(3, 5, (3, 1), 5)


def test_a_dead_follower_leaves_the_isr_and_the_controller_bumps_the_leader_epoch():
    state = PartitionState(1, 0, (1, 2, 3), 1)
    assert logic.after_broker_failure([1, 2, 3], state, 3, {1, 2}, 2) == PartitionState(
        1, 1, (1, 2), 2
    )
    assert logic.after_broker_failure([1, 2, 3], state, 4, {1, 2, 3}, 2) is None


def test_the_last_in_sync_leader_dying_leaves_the_partition_offline_with_its_isr():
    state = PartitionState(1, 3, (1,), 1)
    after = logic.after_broker_failure([1, 2, 3], state, 1, {2, 3}, 1)
    assert after == PartitionState(logic.NO_LEADER, 4, (1,), 1)
    unclean = logic.unclean_election([1, 2, 3], after, {2, 3}, 1)
    assert unclean == PartitionState(2, 5, (2,), 1)


def test_a_returning_broker_leads_its_offline_partition_then_rejoins_isrs():
    offline = PartitionState(logic.NO_LEADER, 4, (3,), 1)
    assert logic.after_broker_return([1, 2, 3], offline, 3, 2) == [PartitionState(3, 5, (3,), 2)]
    led = PartitionState(1, 2, (1, 2), 1)
    # A leader's AlterPartition: same leader epoch.
    assert logic.after_broker_return([1, 2, 3], led, 3, 2) == [PartitionState(1, 2, (1, 2, 3), 2)]


def test_healing_fills_the_isr_and_puts_the_preferred_replica_back():
    state = PartitionState(2, 3, (2,), 1)
    assert logic.healthy([1, 2, 3], state, {1, 2, 3}, 2) == PartitionState(1, 4, (2, 1, 3), 2)
    assert logic.healthy([1, 2, 3], PartitionState(1, 0, (1, 2, 3), 1), {1, 2, 3}, 2) is None


def test_an_expectation_lists_a_sample_counts_everything_and_round_trips_as_json(tmp_path):
    expect = Expectation("broker-failure")
    expect.step("broker 3's session closed")
    for p in range(100):
        expect.event(EventType.ISR_SHRUNK, f"/brokers/topics/t/partitions/{p}/state", removed=(3,))
    expect.instant("unclean_leader_election", "t/0")
    expect.instant("unclean_leader_election", "t/0")
    expect.write(tmp_path / "e.json")
    loaded = json.loads((tmp_path / "e.json").read_text())
    assert loaded["event_counts"] == {EventType.ISR_SHRUNK: 100}
    assert len(loaded["events"]) == 25
    assert loaded["events"][0]["removed"] == [3]
    assert loaded["alerts"] == [
        {"rule": "unclean_leader_election", "entity": "t/0", "severity": "critical"}
    ]
    assert "ISR_SHRUNK x100" in "\n".join(expect.summary())


def test_the_forecast_fires_conditions_that_last_their_for_duration_and_windows_at_threshold():
    from zkcdc.simulate.alert_forecast import AlertForecast
    from zkcdc.streaming.rules.rule_settings import RuleSettings

    clock = [0]
    forecast = AlertForecast(RuleSettings(broker_down_for_ms=5000), lambda: clock[0])
    forecast.condition("broker_down", "broker/1", True)
    clock[0] = 4999
    forecast.condition("broker_down", "broker/1", False)  # a blip: silent
    forecast.condition("broker_down", "broker/2", True)
    clock[0] = 9999
    forecast.condition("broker_down", "broker/2", False)
    forecast.condition("under_replicated", "t/0", True)  # open at the end: the hold decides
    for _ in range(3):
        forecast.count(EventType.CONTROLLER_ELECTED, "/controller", {})
    assert {a["entity"] for a in forecast.alerts(hold_ms=0)} == {"broker/2", "controller"}
    assert {a["rule"] for a in forecast.alerts(hold_ms=10_000)} == {
        "broker_down",
        "controller_flapping",
        "under_replicated",
    }
