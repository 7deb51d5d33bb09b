"""The local 3-broker cluster writes Kafka's ZooKeeper tree as zkcdc will read it."""

from __future__ import annotations

import pytest
from conftest import wait_until
from kafka_tree import partition_state, read_json, registered_brokers

pytestmark = pytest.mark.integration


def test_three_brokers_are_registered(kafka_zk, cluster):
    assert registered_brokers(kafka_zk) == set(cluster.broker_ids) == {1, 2, 3}
    for broker_id in cluster.broker_ids:
        registration = read_json(kafka_zk, f"/brokers/ids/{broker_id}")
        assert registration["version"] == 5
        assert any(str(ep).startswith("PLAINTEXT://127.0.0.1:") for ep in registration["endpoints"])


def test_topic_with_three_replicas_has_a_leader_in_isr_for_every_partition(kafka_zk, new_topic):
    topic = new_topic(partitions=3, replication_factor=3)

    assignment = wait_until(
        lambda: read_json(kafka_zk, f"/brokers/topics/{topic}"), what="assignment"
    )
    assert sorted(assignment["partitions"]) == ["0", "1", "2"]
    assert all(sorted(r) == [1, 2, 3] for r in assignment["partitions"].values())
    assert sorted(kafka_zk.get_children(f"/brokers/topics/{topic}/partitions")) == ["0", "1", "2"]

    for partition in range(3):
        state = wait_until(
            lambda p=partition: (
                (s := partition_state(kafka_zk, topic, p)) and len(s["isr"]) == 3 and s
            ),
            what=f"partition {partition} with a full ISR",
        )
        assert state["leader"] in state["isr"]
        assert sorted(state["isr"]) == [1, 2, 3]
        assert state["version"] == 1


def test_each_test_gets_its_own_chroot(zk_chroot):
    zk_chroot.create("/brokers/ids/7", b"{}", makepath=True)
    assert zk_chroot.get_children("/brokers/ids") == ["7"]
