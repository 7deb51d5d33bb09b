"""The stack can stage the incidents later capture and alert tests need."""

from __future__ import annotations

import signal

import pytest
from conftest import wait_until
from kafka_tree import (
    controller_epoch,
    controller_id,
    full_isr,
    partition_state,
    restart_broker,
)

pytestmark = pytest.mark.integration


@pytest.mark.stops_brokers
def test_stopping_the_controller_moves_controller_and_bumps_its_epoch(cluster, kafka_zk):
    old_controller = wait_until(lambda: controller_id(kafka_zk), what="a controller")
    old_epoch = controller_epoch(kafka_zk)

    cluster.stop_broker(old_controller, signal.SIGTERM)
    try:
        new_controller = wait_until(
            lambda: (c := controller_id(kafka_zk)) not in (None, old_controller) and c,
            what="another broker to become controller",
        )
        assert new_controller in set(cluster.broker_ids) - {old_controller}
        assert controller_epoch(kafka_zk) == old_epoch + 1
    finally:
        restart_broker(cluster, kafka_zk, old_controller)


@pytest.mark.stops_brokers
def test_sigterm_of_a_follower_removes_it_from_the_isr(cluster, kafka_zk, new_topic):
    topic = new_topic(partitions=1, replication_factor=3)
    before = full_isr(kafka_zk, topic, 0, 3)
    follower = next(b for b in before["isr"] if b != before["leader"])

    cluster.stop_broker(follower, signal.SIGTERM)
    try:
        after = wait_until(
            lambda: (s := partition_state(kafka_zk, topic, 0)) and follower not in s["isr"] and s,
            what=f"broker {follower} to leave the ISR",
        )
        assert after["leader"] == before["leader"]
        assert sorted(after["isr"]) == sorted(set(before["isr"]) - {follower})
    finally:
        restart_broker(cluster, kafka_zk, follower)
    wait_until(
        lambda: follower in (partition_state(kafka_zk, topic, 0) or {}).get("isr", []),
        what=f"broker {follower} to rejoin the ISR",
    )
