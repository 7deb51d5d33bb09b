"""The alert rules, engine and tracker without Spark: records in, FIRING/RESOLVED out."""

from __future__ import annotations

import pickle

import pytest

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.rule_settings import RuleSettings

from .records import Feed, broker, ev, three_brokers

T0 = 1_000_000


def cluster(settings: RuleSettings | None = None) -> Feed:
    return three_brokers(AlertEngine("c1", settings or RuleSettings()), T0)


def shrink(p: int, leader: int, before: list[int], after: list[int], ce: int = 1) -> dict:
    return ev(EventType.ISR_SHRUNK, topic="t", partition=p, leader=leader, isr_before=before,
              isr_after=after, removed=[b for b in before if b not in after], controller_epoch=ce)  # fmt: skip


def expand(p: int, leader: int, before: list[int], after: list[int]) -> dict:
    return ev(EventType.ISR_EXPANDED, topic="t", partition=p, leader=leader, isr_before=before,
              isr_after=after, controller_epoch=1)  # fmt: skip


def test_a_healthy_snapshot_raises_nothing():
    feed = cluster()
    feed.heartbeat(T0 + 120_000)
    assert feed.alerts == []


def test_under_replicated_fires_after_its_for_duration_and_resolves_with_the_same_id():
    feed = cluster()
    feed.send(T0 + 1000, "/s0", shrink(0, 1, [1, 2, 3], [1, 2]))
    feed.heartbeat(T0 + 10_999)
    assert ("under_replicated", "t/0") not in feed.firing()
    feed.heartbeat(T0 + 11_000)
    fired = [a for a in feed.alerts if a.rule == "under_replicated"]
    assert [a.status for a in fired] == ["FIRING"]
    assert fired[0].started_ms == T0 + 1000 and fired[0].severity == "warning"
    assert fired[0].details["isr"] == "1,2"
    feed.send(T0 + 15_000, "/s0", expand(0, 1, [1, 2], [1, 2, 3]))
    resolved = [a for a in feed.alerts if a.rule == "under_replicated"][-1]
    assert resolved.status == "RESOLVED" and resolved.alert_id == fired[0].alert_id
    assert resolved.ended_ms == T0 + 15_000


def test_a_blip_shorter_than_the_for_duration_stays_silent():
    feed = cluster()
    feed.send(T0 + 1000, "/s0", shrink(0, 1, [1, 2, 3], [1, 2]))
    feed.send(T0 + 3000, "/s0", expand(0, 1, [1, 2], [1, 2, 3]))
    feed.heartbeat(T0 + 60_000)
    assert feed.alerts == []


def test_broker_down_offline_partition_and_under_min_isr():
    feed = cluster()
    feed.send(T0 + 1, "/config/topics/t", ev(EventType.CONFIG_CHANGED, entity_type="topics",
              entity_name="t", config_after={"min.insync.replicas": "2"}))  # fmt: skip
    feed.send(T0 + 1000, "/brokers/ids/1", broker(1, up=False))
    feed.send(T0 + 1001, "/s0", ev(EventType.LEADER_CHANGED, topic="t", partition=0, leader_before=1,
              leader_after=-1, isr_after=[1], leader_epoch_before=0, leader_epoch_after=1,
              clean=True, controller_epoch=1),
              ev(EventType.PARTITION_OFFLINE, topic="t", partition=0, leader=-1, isr=[1]))  # fmt: skip
    feed.send(T0 + 1002, "/s1", shrink(1, 2, [2, 3, 1], [2, 3]))
    assert ("offline_partition", "t/0") in feed.firing()  # no for-duration
    feed.heartbeat(T0 + 30_000)
    assert feed.firing() >= {("broker_down", "broker/1"), ("under_replicated", "t/1")}
    assert ("under_replicated", "t/0") not in feed.firing()  # offline says it
    assert ("under_min_isr", "t/1") not in feed.firing()  # 2 in sync, min 2
    feed.send(T0 + 31_000, "/s1", shrink(1, 2, [2, 3], [2]))
    feed.heartbeat(T0 + 40_000)
    assert ("under_min_isr", "t/1") in feed.firing()


def test_a_partition_gone_with_its_topic_ends_what_it_held():
    """A partition no longer known (its topic deleted) is as one whose state was never seen;
    what it held still ends."""
    feed = cluster()
    feed.send(T0 + 1000, "/s0", ev(EventType.PARTITION_OFFLINE, topic="t", partition=0, leader=-1,
                                   isr=[1]))  # fmt: skip
    feed.send(T0 + 1001, "/s1", shrink(1, 2, [2, 3, 1], [2, 3]))
    assert ("offline_partition", "t/0") in feed.firing()
    feed.send(T0 + 2000, "/brokers/topics/t", ev(EventType.TOPIC_DELETED, topic="t"), op="DELETE")
    assert ("offline_partition", "t/0") in feed.resolved()
    feed.heartbeat(T0 + 60_000)  # t/1's under-replication, still pending at the deletion
    assert ("under_replicated", "t/1") not in feed.firing()
    assert not feed.engine.tracker.conditions


def test_a_topics_min_insync_replicas_changed_moves_its_partitions_rules_and_nothing_else_does():
    feed = cluster(RuleSettings(under_min_isr_for_ms=0))

    def config(ts: int, values: dict[str, str]) -> None:
        feed.send(ts, "/config/topics/t", ev(EventType.CONFIG_CHANGED, entity_type="topics",
                                             entity_name="t", config_after=values))  # fmt: skip

    feed.send(T0 + 1000, "/s1", shrink(1, 2, [2, 3, 1], [2]))
    assert ("under_min_isr", "t/1") not in feed.firing()  # min.insync.replicas 1 by default
    config(T0 + 2000, {"min.insync.replicas": "2"})
    assert ("under_min_isr", "t/1") in feed.firing()
    config(T0 + 3000, {"min.insync.replicas": "2", "retention.ms": "1000"})
    assert ("under_min_isr", "t/1") not in feed.resolved()
    config(T0 + 4000, {"retention.ms": "1000"})
    assert ("under_min_isr", "t/1") in feed.resolved()


def test_instant_rules_fire_on_the_change_and_resolve_after_the_hold():
    feed = cluster(RuleSettings(instant_hold_ms=5000))
    feed.send(T0 + 10, "/s0", ev(EventType.LEADER_CHANGED, topic="t", partition=0, leader_before=1,
              leader_after=3, isr_before=[1], isr_after=[3], leader_epoch_before=4,
              leader_epoch_after=5, clean=False, controller_epoch=1))  # fmt: skip
    feed.send(T0 + 20, "/s1", shrink(1, 2, [2, 3, 1], [2, 3], ce=0))  # a zombie's write
    feed.send(T0 + 30, "/o", ev(EventType.OFFSET_COMMITTED, group="g", topic="t", partition=0,
              offset_before=500, offset_after=100))  # fmt: skip
    feed.send(T0 + 40, "/s1", ev(EventType.LEADER_EPOCH_BUMPED, topic="t", partition=1, leader=2,
              leader_epoch_before=7, leader_epoch_after=3, isr_before=[2, 3],
              isr_after=[2, 3], controller_epoch=1))  # fmt: skip
    assert feed.firing() == {
        ("unclean_leader_election", "t/0"),
        ("controller_epoch_regression", "t/1"),
        ("offset_regression", "group/g"),
        ("leader_epoch_regression", "t/1"),
    }
    feed.heartbeat(T0 + 5_100)
    assert feed.resolved() >= feed.firing()


def test_a_state_rewritten_by_a_new_controller_keeps_its_epoch_and_an_older_one_alerts():
    feed = cluster()
    feed.send(T0 + 10, "/controller_epoch",
              ev(EventType.CONTROLLER_EPOCH_CHANGED, epoch_before=1, epoch_after=2))  # fmt: skip
    feed.send(T0 + 20, "/s0", ev(EventType.PARTITION_STATE_REWRITTEN, topic="t", partition=0,
              leader=1, isr_after=[1, 2, 3], controller_epoch=2, epoch_before=1))  # fmt: skip
    feed.send(T0 + 30, "/s1", ev(EventType.PARTITION_STATE_REWRITTEN, topic="t", partition=1,
              leader=2, isr_after=[2, 3, 1], controller_epoch=0, epoch_before=1))  # fmt: skip
    partitions = feed.engine.state.partitions
    assert (partitions[("t", 0)].controller_epoch, partitions[("t", 1)].controller_epoch) == (2, 0)
    assert feed.firing() == {("controller_epoch_regression", "t/1")}


def test_snapshot_reads_raise_no_instant_alerts():
    feed = cluster()
    feed.send(T0 + 10, "/o", ev(EventType.OFFSET_COMMITTED, group="g", topic="t", partition=0,
              offset_before=500, offset_after=100), op="READ")  # fmt: skip
    assert feed.alerts == []


def test_controller_failover_flapping_and_no_active_controller():
    feed = cluster(RuleSettings(no_active_controller_for_ms=2000))
    feed.send(T0 + 100, "/controller", ev(EventType.CONTROLLER_RESIGNED, broker_id=1))
    feed.heartbeat(T0 + 2200)
    assert ("no_active_controller", "controller") in feed.firing()
    for i, b in enumerate([2, 3, 2]):
        feed.send(
            T0 + 3000 + i * 1000, "/controller", ev(EventType.CONTROLLER_ELECTED, broker_id=b)
        )
    assert ("controller_failover", "controller") in feed.firing()
    assert ("controller_flapping", "controller") in feed.firing()
    assert ("no_active_controller", "controller") in feed.resolved()
    feed.heartbeat(T0 + 200_000)
    assert ("controller_flapping", "controller") in feed.resolved()


def test_isr_flapping_counts_changes_in_its_window():
    feed = cluster()
    for i in range(2):
        feed.send(T0 + i * 2000, "/s0", shrink(0, 1, [1, 2, 3], [1, 2]))
        feed.send(T0 + i * 2000 + 1000, "/s0", expand(0, 1, [1, 2], [1, 2, 3]))
    assert ("isr_flapping", "t/0") in feed.firing()
    feed.heartbeat(T0 + 70_000)
    assert ("isr_flapping", "t/0") in feed.resolved()


def test_preferred_leader_imbalance_counts_only_live_brokers():
    feed = cluster(RuleSettings(preferred_leader_imbalance_for_ms=0))
    # Broker 2 leads its preferred partition 1 no more: 1 of 1 = 100 % > 10 %.
    feed.send(T0 + 10, "/s1", ev(EventType.LEADER_CHANGED, topic="t", partition=1, leader_before=2,
              leader_after=3, isr_before=[2, 3, 1], isr_after=[2, 3, 1], leader_epoch_before=0,
              leader_epoch_after=1, clean=True, controller_epoch=1))  # fmt: skip
    assert ("preferred_leader_imbalance", "broker/2") in feed.firing()
    feed.send(T0 + 20, "/brokers/ids/2", broker(2, up=False))
    assert ("preferred_leader_imbalance", "broker/2") in feed.resolved()


def test_reassignment_and_topic_deletion_stuck_after_their_thresholds():
    feed = cluster()
    feed.send(T0 + 10, "/admin/reassign_partitions", ev(EventType.REASSIGNMENT_REQUESTED, partitions=[
        {"topic": "t", "partition": 0, "replicas": [1, 2, 4]}]))  # fmt: skip
    feed.send(T0 + 20, "/admin/delete_topics/t", ev(EventType.TOPIC_DELETION_REQUESTED, topic="t"))
    feed.heartbeat(T0 + 29_000)
    assert feed.alerts == []
    feed.heartbeat(T0 + 30_100)
    assert feed.firing() == {("reassignment_stuck", "t/0"), ("topic_deletion_stuck", "topic/t")}


def test_legacy_consumer_rules_follow_the_range_assignment():
    feed = cluster(RuleSettings(consumer_partition_unowned_for_ms=0, consumer_idle_for_ms=0,
                                consumer_owner_mismatch_for_ms=0))  # fmt: skip
    for c in ("a", "b", "c"):
        feed.send(T0 + 1, f"/consumers/g/ids/{c}", ev(EventType.CONSUMER_REGISTERED, group="g",
                  consumer_id=c, subscription={"t": 1}))  # fmt: skip
    # 2 partitions, 3 consumers: a-0 gets 0, b-0 gets 1, c is idle.
    feed.send(T0 + 2, "/o0", ev(EventType.PARTITION_OWNER_CHANGED, group="g", topic="t", partition=0,
              owner_after="a-0"))  # fmt: skip
    assert ("consumer_partition_unowned", "group/g") in feed.firing()
    assert ("consumer_idle", "group/g") in feed.firing()
    feed.send(T0 + 3, "/o1", ev(EventType.PARTITION_OWNER_CHANGED, group="g", topic="t", partition=1,
              owner_after="c-0"))  # fmt: skip
    assert ("consumer_partition_unowned", "group/g") in feed.resolved()
    assert ("consumer_owner_mismatch", "group/g") in feed.firing()


def test_a_record_seen_twice_raises_nothing_twice_and_the_engine_pickles():
    feed = cluster(RuleSettings(instant_hold_ms=5000))
    record = {"seq": 100, "ts_ms": T0 + 5, "op": "UPDATE", "path": "/o", "events": [
        ev(EventType.OFFSET_COMMITTED, group="g", topic="t", partition=0, offset_before=5, offset_after=1)]}  # fmt: skip
    assert len(feed.engine.process(record)) == 1
    copy = pickle.loads(pickle.dumps(feed.engine))
    assert copy.process(record) == []
    assert [a.status for a in copy.advance(T0 + 6000)] == ["RESOLVED"]


def test_rule_settings_overrides_are_checked():
    settings = RuleSettings().with_overrides({"under_replicated.for_ms": "2000"})
    assert settings.under_replicated_for_ms == 2000
    with pytest.raises(StreamingError, match="unknown rule setting 'nope'"):
        RuleSettings().with_overrides({"nope": "1"})
    with pytest.raises(StreamingError, match="needs a number"):
        RuleSettings().with_overrides({"under_replicated_for_ms": "soon"})


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"broker-down.for_ms": "-1"}, "rule setting 'broker-down.for_ms' must not be negative"),
        ({"preferred_leader_imbalance_ratio": "-0.5"}, "must not be negative"),
        ({"instant_hold_ms": "2.5"}, "rule setting 'instant_hold_ms' needs a number, got '2.5'"),
        ({"instant_hold_ms": ""}, "needs a number"),
    ],
)
def test_a_bad_rule_override_is_one_line_naming_it_as_given(override, message):
    with pytest.raises(StreamingError, match=message.replace(".", r"\.")):
        RuleSettings().with_overrides(override)
