"""`zkcdc stream alerts` on the real stack: capture watches Kafka's own tree, the Spark job turns
its records into alerts on a Kafka topic, read back here as JSON."""

from __future__ import annotations

import signal

import pytest
from conftest import wait_until
from kafka_tree import controller_id, partition_state, registered_brokers

pytestmark = pytest.mark.integration


def test_a_stopped_follower_fires_under_replicated_and_its_return_resolves_it(
    cluster, kafka_zk, new_topic, start_capture, changes_topic, start_alert_job
):
    topic = new_topic(partitions=2, replication_factor=3)
    wait_until(lambda: all(len((partition_state(kafka_zk, topic, p) or {}).get("isr", [])) == 3
                           for p in (0, 1)), what="full ISRs")  # fmt: skip
    daemon = start_capture(cluster.zookeeper_hosts + cluster.chroot, "--cluster", "real",
                           publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")
    job, alerts = start_alert_job(changes_topic)

    controller = controller_id(kafka_zk)
    follower = next(b for b in cluster.broker_ids if b != controller)
    cluster.stop_broker(follower, signal.SIGTERM)
    try:
        firing = {
            p: alerts.wait_for(
                lambda a, p=p: a["rule"] == "under_replicated" and a["entity"] == f"{topic}/{p}"
                and a["status"] == "FIRING", f"under_replicated FIRING for {topic}/{p}", 120, job,
            )
            for p in (0, 1)
        }  # fmt: skip
    finally:
        cluster.start_broker(follower)
    wait_until(lambda: follower in registered_brokers(kafka_zk), what="the follower back")
    for p, fired in firing.items():
        assert fired["severity"] == "warning" and fired["cluster"] == "real"
        assert str(follower) not in fired["details"]["isr"].split(",")
        resolved = alerts.wait_for(
            lambda a, fired=fired: a["alert_id"] == fired["alert_id"] and a["status"] == "RESOLVED",
            f"under_replicated RESOLVED for {topic}/{p}", 120, job,
        )  # fmt: skip
        assert resolved["ended_ms"] >= fired["started_ms"]
        assert resolved["started_ms"] == fired["started_ms"]

    cluster.stop_broker(controller, signal.SIGTERM)
    try:
        failover = alerts.wait_for(
            lambda a: a["rule"] == "controller_failover" and a["status"] == "FIRING",
            "controller_failover", 120, job,
        )  # fmt: skip
        assert failover["details"]["broker_before"] == str(controller)
    finally:
        cluster.start_broker(controller)
        wait_until(lambda: controller in registered_brokers(kafka_zk), what="controller back")
    assert job.stop() == 0, job.tail()
    firing_ids = [a["alert_id"] for a in alerts.alerts if a["status"] == "FIRING"]
    assert len(firing_ids) == len(set(firing_ids)), "an alert FIRING twice"
