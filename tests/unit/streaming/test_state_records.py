"""The state upserts the engine publishes, and `zkcdc state show`'s view of them, without Spark
or Kafka: records in, the newest value per key out, rendered as tables."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.cluster_state import ClusterState, Partition
from zkcdc.streaming.rules.state_records import upserts
from zkcdc.streaming.state.state_view import ClusterView, choose_cluster

from .records import Feed, broker, ev, three_brokers

T0 = 1_000_000


def compacted(feed: Feed, latest: dict[str, dict] | None = None) -> dict[str, dict]:
    """What a reader of the compacted topic has after the engine's next upserts."""
    latest = {} if latest is None else latest
    for key, value in feed.engine.take_state():
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = json.loads(json.dumps(value))  # as it travels
    return latest


def small_cluster() -> Feed:
    return three_brokers(AlertEngine("c1"), T0)


def test_every_entity_of_the_snapshot_becomes_one_upsert_keyed_by_cluster_kind_and_id():
    latest = compacted(small_cluster())
    assert set(latest) == {
        "c1/broker/1", "c1/broker/2", "c1/broker/3", "c1/controller", "c1/topic/t",
        "c1/partition/t/0", "c1/partition/t/1",
    }  # fmt: skip
    assert latest["c1/controller"]["broker_id"] == 1 and latest["c1/controller"]["epoch"] == 1
    p0 = latest["c1/partition/t/0"]
    assert p0["isr"] == [1, 2, 3] and p0["leader"] == 1 and not p0["under_replicated"]
    assert latest["c1/broker/2"]["preferred_partitions"] == 1


def test_only_what_changed_since_the_last_take_is_published_again():
    feed = small_cluster()
    compacted(feed)
    feed.send(T0 + 10, "/b3", broker(3, up=False))
    feed.send(T0 + 20, "/s0", ev(EventType.ISR_SHRUNK, topic="t", partition=0, leader=1,
                                 isr_before=[1, 2, 3], isr_after=[1, 2], controller_epoch=1))  # fmt: skip
    keys = [key for key, _ in feed.engine.take_state()]
    assert sorted(keys) == ["c1/broker/3", "c1/controller", "c1/partition/t/0"]


def test_a_deleted_topic_leaves_tombstones_for_its_partitions():
    feed = small_cluster()
    latest = compacted(feed)
    feed.send(T0 + 10, "/brokers/topics/t", ev(EventType.TOPIC_DELETED, topic="t"), op="DELETE")
    latest = compacted(feed, latest)
    assert not [k for k in latest if "/t" in k], latest


def test_the_view_lists_down_brokers_under_replicated_partitions_and_preferred_shares():
    feed = small_cluster()
    feed.send(T0 + 10, "/b3", broker(3, up=False))
    feed.send(T0 + 20, "/s1", ev(EventType.LEADER_CHANGED, topic="t", partition=1, leader_before=2,
                                 leader_after=3, isr_after=[3], clean=True,
                                 controller_epoch=1))  # fmt: skip
    view = ClusterView.of("c1", compacted(feed))
    assert [p["partition"] for p in view.under_replicated] == [1]
    assert view.offline == []
    console = Console(width=160, record=True)
    console.print(view.summary())
    for table in view.tables():
        console.print(table)
    text = console.export_text()
    assert "cluster c1: 2/3 brokers alive, 1 topics, 2 partitions, 1 under-replicated" in text
    assert "t/1" in text and "NO" in text
    preferred = text[text.index("Preferred leaders") :]
    rows = [line.replace("│", " ").split() for line in preferred.splitlines()]
    # broker 1 leads the partition it is preferred for; broker 2 no longer leads t/1
    assert ["1", "1", "1", "100", "%"] in rows and ["2", "1", "0", "0", "%"] in rows, preferred


def test_a_cluster_is_chosen_by_name_or_alone_and_otherwise_the_error_says_which_exist():
    keys = ["a/broker/1", "b/controller"]
    assert choose_cluster(keys, "b") == "b"
    assert choose_cluster(["a/broker/1"], None) == "a"
    with pytest.raises(StreamingError, match=r"several clusters \(a, b\)"):
        choose_cluster(keys, None)
    with pytest.raises(StreamingError, match="no state of cluster 'c'; known: a, b"):
        choose_cluster(keys, "c")
    with pytest.raises(StreamingError, match="holds no cluster"):
        choose_cluster([], None)


_ENTITIES = st.one_of(
    st.tuples(st.just("partition"), st.tuples(st.sampled_from(["a", "a.b", "b-1", "ab"]),
                                              st.integers(0, 120))),
    st.tuples(st.just("broker"), st.integers(0, 120)),
    st.tuples(st.just("topic"), st.sampled_from(["a", "a.b", "b-1", "ab"])),
    st.tuples(st.just("group"), st.sampled_from(["g", "g2", "G"])),
    st.just(("controller", None)),
)  # fmt: skip


@given(st.lists(_ENTITIES, max_size=60))
def test_upserts_name_each_entity_once_in_a_stable_order(entities: list) -> None:
    """By kind, then partitions by topic and number, the others by their id as text: however
    the entities come, repeated or not, in a set or a list."""
    state = ClusterState("c")
    for kind, ident in entities:
        if kind == "partition":
            state.partitions[ident] = Partition(replicas=(1,), leader=1, isr=(1,))
    keys = [key for key, _ in upserts(state, entities, 5)]
    assert keys == [key for key, _ in upserts(state, set(entities), 5)]
    order = sorted(set(entities), key=lambda e: (e[0], e[1] if e[0] == "partition" else str(e[1])))
    assert len(keys) == len(order)
    assert keys == [key for e in order for key, _ in upserts(state, [e], 5)]
