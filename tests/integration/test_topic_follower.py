"""The page's topic readers on the real stack: a topic made after the reader starts (the alert
job makes its topics when it starts, often after `zkcdc ui`) is waited for and read whole, even
in the moment it is listed before its partitions have leaders."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from conftest import wait_until

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.topic_creation import create_topics
from zkcdc.view.topic_follower import TopicFollower

pytestmark = pytest.mark.integration
PARTITIONS = 24


def _delete(kafka: KafkaConnection, topic: str) -> None:
    admin = kafka.admin()
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(timeout=60)


def test_a_reader_started_before_its_topic_exists_reads_every_partition_once_it_is_made(
    cluster: Any, request: pytest.FixtureRequest
) -> None:
    kafka = KafkaConnection(bootstrap_servers=cluster.bootstrap_servers)
    topic = f"follower-{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    made: list[TopicFollower] = []
    failed: list[BaseException] = []

    def start() -> None:
        try:
            made.append(TopicFollower(kafka, topic, wait_s=90))
        except BaseException as exc:  # the test reports it
            failed.append(exc)

    reader = threading.Thread(target=start, daemon=True)
    reader.start()
    try:
        # Not awaited: the reader sees the topic while its leaders are still being chosen.
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        # The reader may see it before its leaders are chosen: they come after.
        create_topics(kafka.admin, [NewTopic(topic, PARTITIONS, 3)], 60)
        producer = kafka.producer()
        for p in range(PARTITIONS):
            producer.produce(topic, value=f"m{p}".encode(), partition=p)
        assert producer.flush(60) == 0, "messages not written"
        reader.join(120)
        assert not failed, f"the reader gave up: {failed[0]}"
        assert made, "the reader did not start within 120 s"
        follower = made[0]
        seen: set[str] = set()
        wait_until(
            lambda: seen.update(m.value().decode() for m in follower.poll(0.5)) or
            len(seen) == PARTITIONS,
            what="one message from each partition",
        )  # fmt: skip
        assert seen == {f"m{p}" for p in range(PARTITIONS)}
        follower.close()
    finally:
        reader.join(1)
        _delete(kafka, topic)


def test_a_reader_is_at_the_end_once_it_read_what_each_partition_holds_and_not_before(
    cluster: Any, request: pytest.FixtureRequest
) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    kafka = KafkaConnection(bootstrap_servers=cluster.bootstrap_servers)
    topic = f"at-end-{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    create_topics(kafka.admin, [NewTopic(topic, 3, 3)], 60)
    try:
        producer = kafka.producer()
        for i in range(20):  # partition 2 left empty: an empty partition is at its end
            producer.produce(topic, value=f"m{i}".encode(), partition=i % 2)
        assert producer.flush(60) == 0, "messages not written"
        follower = TopicFollower(kafka, topic)
        try:
            read: list[Any] = []
            assert not follower.at_end(), "at the end before reading anything"
            wait_until(
                lambda: read.extend(follower.poll(0.5)) or len(read) == 20,
                what="the 20 messages",
            )  # fmt: skip
            wait_until(follower.at_end, what="the reader at the end of every partition")
            producer.produce(topic, value=b"late", partition=1)
            assert producer.flush(60) == 0
            # A message written after: read, and the reader is at the new end.
            late: list[Any] = []
            wait_until(lambda: late.extend(follower.poll(0.5)) or bool(late), what="the late one")
            assert [m.value() for m in late] == [b"late"]
            assert follower.at_end()
        finally:
            follower.close()
    finally:
        _delete(kafka, topic)
