"""The changes topic as capture keys its records for: a topic gone or re-partitioned is said in
one line naming the topic and what changed; a restart into a resized topic is refused unless
the operator accepts it; Kafka not answering is no change."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from zkcdc.capture.delivery.topic_guard import (
    TopicChangedError,
    TopicGuard,
    TopicRefused,
    settled_count,
    starting_count,
)
from zkcdc.ground import waiting


class Client:
    def __init__(self, partitions: int | None) -> None:
        self.partitions = partitions
        self.asked = 0
        self.down = False
        self.leader = 1
        self.error: KafkaError | None = None  # what Kafka says of the topic

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked += 1
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
        if self.error is not None:
            return SimpleNamespace(topics={topic: SimpleNamespace(error=self.error, partitions={})})
        found = (
            {}
            if self.partitions is None
            else {
                topic: SimpleNamespace(
                    error=None,
                    partitions={
                        p: SimpleNamespace(leader=self.leader, error=None)
                        for p in range(self.partitions)
                    },
                )
            }
        )
        return SimpleNamespace(topics=found)


def test_the_guard_names_a_vanished_or_resized_topic_and_not_a_kafka_away() -> None:
    client = Client(6)
    guard = TopicGuard(client, "zkcdc.changes", 6, 1.0, background=False)
    guard.check()
    assert client.asked == 0  # the loop's check only reads what the last answer showed
    guard.check(force=True)
    assert client.asked == 1
    client.down = True
    guard.check(force=True)  # unreachable: not a topic change
    client.down, client.partitions = False, None
    with pytest.raises(TopicChangedError, match=r"changes topic zkcdc.changes is gone .*6 part"):
        guard.check(force=True)
    with pytest.raises(TopicChangedError):
        guard.check()  # and it stays said
    resized = TopicGuard(Client(1), "zkcdc.changes", 6, 1.0, background=False)
    with pytest.raises(TopicChangedError, match=r"now has 1 partition\(s\), not the 6"):
        resized.check(force=True)


def test_the_guards_thread_asks_and_the_loop_hears_it_without_waiting() -> None:
    client = Client(None)
    guard = TopicGuard(client, "t", 6, 1.0, every_s=0.01)
    try:

        def heard() -> bool:
            try:
                guard.check()
            except TopicChangedError:
                return True
            return False

        waiting.wait_until(heard, 10, what="the guard's thread to ask", interval_s=0.01)
    finally:
        guard.close()


def test_a_restart_into_a_resized_topic_is_refused_unless_accepted(tmp_path: Path) -> None:
    assert starting_count(tmp_path, "t", 6, accept=False) == 6
    assert starting_count(tmp_path, "t", 6, accept=False) == 6
    with pytest.raises(TopicChangedError, match=r"has 1 partition.*keyed its records for 6"):
        starting_count(tmp_path, "t", 1, accept=False)
    assert starting_count(tmp_path, "t", 1, accept=True) == 1  # the operator's say-so
    assert starting_count(tmp_path, "t", 1, accept=False) == 1  # and from then on, 1
    assert starting_count(tmp_path, "other", 3, accept=False) == 3  # another topic: its own


def test_a_topic_missing_in_fewer_answers_in_a_row_than_confirm_is_no_change() -> None:
    """A broker just started answers "no such topic" until its metadata cache is filled."""

    class Flaky(Client):
        answers = [None, None, 6, None, 6, None, None, None, 6] * 50

        def list_topics(self, topic: str, timeout: float) -> Any:
            self.partitions = self.answers[self.asked % len(self.answers)]
            return super().list_topics(topic, timeout)

    client = Flaky(6)
    guard = TopicGuard(client, "t", 6, 1.0, every_s=0.001, confirm=4)
    try:
        while client.asked < 200:
            guard.check()  # never raises: three "gone" in a row at most
            time.sleep(0.001)
    finally:
        guard.close()


def test_the_guard_times_how_long_the_brokers_have_answered_in_full() -> None:
    """What says a commit is stuck, not waiting out an outage: answers with a leader for every
    partition, in a row; any other answer starts the count again."""
    clock = [50.0]
    client = Client(6)
    guard = TopicGuard(client, "t", 6, 1.0, background=False, now=lambda: clock[0])
    assert guard.answering_for() == 0.0  # nothing asked yet
    guard.check(force=True)
    clock[0] += 20
    guard.check(force=True)
    assert guard.answering_for() == 20.0
    client.down = True
    guard.check(force=True)
    assert guard.answering_for() == 0.0
    client.down = False
    guard.check(force=True)
    clock[0] += 5
    assert guard.answering_for() == 5.0
    client.leader = -1  # a partition without a leader (brokers starting)
    guard.check(force=True)
    assert guard.answering_for() == 0.0


def test_a_metadata_request_left_unanswered_means_the_brokers_do_not_answer() -> None:
    """Every broker killed: the guard's request waits its whole timeout. While it waits, the
    healthy answers before it no longer count (a commit held by the outage is not stuck)."""
    clock = [0.0]
    release = threading.Event()

    class Hanging(Client):
        def list_topics(self, topic: str, timeout: float) -> Any:
            if self.down:
                self.asked += 1
                release.wait(10)
                raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
            return super().list_topics(topic, timeout)

    client = Hanging(6)
    guard = TopicGuard(client, "t", 6, 1.0, background=False, now=lambda: clock[0])
    guard.check(force=True)
    clock[0] += 100
    assert guard.answering_for() == 100
    client.down = True
    asking = threading.Thread(target=guard.check, kwargs={"force": True})
    asking.start()
    waiting.wait_until(lambda: client.asked >= 2, 10, what="a second ask", interval_s=0.01)
    assert guard.answering_for() == 100  # just asked: not late yet
    clock[0] += 3
    assert guard.answering_for() == 0.0
    release.set()
    asking.join(10)
    assert guard.answering_for() == 0.0


def test_an_answer_that_came_late_starts_the_count_again() -> None:
    """Stop 48's CI run: every broker stopped, the guard's request waited, and the first broker
    back answered it 15 s later. The answers before the outage must not count with it, or a
    commit that waited out the outage is called stuck the moment that answer comes."""
    clock = [0.0]

    class Late(Client):
        late = False

        def list_topics(self, topic: str, timeout: float) -> Any:
            if self.late:
                clock[0] += 15  # waited while every broker was away; then one answered
            return super().list_topics(topic, timeout)

    client = Late(6)
    guard = TopicGuard(client, "t", 6, 20.0, background=False, now=lambda: clock[0])
    guard.check(force=True)
    clock[0] += 100
    client.late = True
    guard.check(force=True)
    assert guard.answering_for() == 0.0
    client.late = False
    clock[0] += 4
    guard.check(force=True)
    assert guard.answering_for() == 4.0


def test_a_topic_kafka_refuses_to_describe_is_said_at_once_and_not_as_missing() -> None:
    """Any failure read as "no answer yet": an authorization error waited out the whole timeout
    and was then reported as a topic that is not on Kafka."""
    client = Client(6)
    client.error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")
    with pytest.raises(TopicRefused, match=r"refuses the metadata of changes topic zkcdc\.ch"):
        settled_count(client, "zkcdc.changes", 30.0)
    assert client.asked == 1, "asked again as if it might pass"
    guard = TopicGuard(client, "zkcdc.changes", 6, 1.0, background=False, confirm=1)
    with pytest.raises(TopicChangedError, match=r"refuses the metadata"):
        guard.check(force=True)


def test_a_topic_without_leaders_until_the_deadline_says_so_not_that_it_is_missing() -> None:
    client = Client(6)
    client.error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE, "Leader not available")
    with pytest.raises(TopicChangedError, match=r"no usable answer in 0 s .*Leader not avail"):
        settled_count(client, "zkcdc.changes", 0.0)
