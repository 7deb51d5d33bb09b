"""Creating topics asks again while Kafka's refusals pass, with a client of its own each time,
and stops at the first refusal that does not pass (or at the deadline) with one clear error.

Kafka cannot be made to refuse on demand here (the refusal CI met came from librdkafka dropping
a broker whose peers had not listed it yet, a moment after a KRaft cluster started), so the
admin client is a stand-in that answers with the refusals given."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic
from manual_clock import ManualClock

from zkcdc.ground.topic_creation import TopicCreationError, create_topics, ensure_topic

NO_ANSWER = 1 << 20  # an outcome: the future is never answered


class RefusingAdmin:
    """Answers each create with the next outcome of its topic: an error code, or None (made)."""

    def __init__(self, outcomes: dict[str, list[int | None]], asked: list[list[str]]) -> None:
        self.outcomes, self.asked = outcomes, asked
        self.replicas: list[int] = []

    def create_topics(self, topics: list[NewTopic], operation_timeout: float) -> dict[str, Any]:
        self.asked.append([t.topic for t in topics])
        self.replicas = [t.replication_factor for t in topics]
        answers: dict[str, Future[None]] = {}
        for topic in topics:
            future: Future[None] = Future()
            code = self.outcomes[topic.topic].pop(0)
            if code == NO_ANSWER:
                pass
            elif code is None:
                future.set_result(None)
            else:
                future.set_exception(KafkaException(KafkaError(code)))
            answers[topic.topic] = future
        return answers


def _create(outcomes: dict[str, list[int | None]], timeout_s: float = 60, **kw: Any) -> list[Any]:
    asked: list[list[str]] = []
    clients: list[RefusingAdmin] = []

    def new_admin() -> RefusingAdmin:
        clients.append(RefusingAdmin(outcomes, asked))
        return clients[-1]

    clock = ManualClock()
    topics = [NewTopic(name, 1, 3) for name in outcomes]
    create_topics(new_admin, topics, timeout_s, now=clock, sleep=clock.sleep, **kw)
    return [asked, clients]


def test_a_dropped_broker_and_a_moving_controller_are_asked_again_with_a_new_client() -> None:
    asked, clients = _create({
        "a": [KafkaError._DESTROY_BROKER, KafkaError.NOT_CONTROLLER, None],
        "b": [None],
    })  # fmt: skip
    assert asked == [["a", "b"], ["a"], ["a"]]  # a made topic is not asked for again
    assert len(clients) == 3


def test_a_controller_back_from_a_zookeeper_stall_is_asked_again() -> None:
    """It answered UNKNOWN_SERVER_ERROR once, then made the topic (a ZooKeeper frozen, then
    thawed, under a capture started with --wait)."""
    asked, clients = _create({"a": [KafkaError.UNKNOWN, None]})
    assert asked == [["a"], ["a"]]
    assert len(clients) == 2


def test_an_existing_topic_counts_as_made_after_a_lost_answer_but_not_on_the_first_ask() -> None:
    _create({"a": [KafkaError._TIMED_OUT, KafkaError.TOPIC_ALREADY_EXISTS]})
    with pytest.raises(TopicCreationError, match=r"cannot create topic a: .*already exists") as e:
        _create({"a": [KafkaError.TOPIC_ALREADY_EXISTS]})
    assert not e.value.transient  # asking again would meet the same topic
    _create({"a": [KafkaError.TOPIC_ALREADY_EXISTS]}, exist_ok=True)


def test_a_refusal_that_does_not_pass_is_one_clear_error_at_once() -> None:
    with pytest.raises(TopicCreationError, match=r"cannot create topic bad: ") as caught:
        _create({"bad": [KafkaError.INVALID_REPLICATION_FACTOR, None]})
    assert isinstance(caught.value.__cause__, KafkaException)
    assert not caught.value.transient  # --wait does not ask again for what will not pass


def test_refusals_past_the_deadline_end_in_an_error_not_a_loop_that_a_later_try_may_pass() -> None:
    with pytest.raises(TopicCreationError, match="cannot create topic a") as caught:
        _create({"a": [KafkaError._DESTROY_BROKER] * 100}, timeout_s=10)
    assert caught.value.transient


def test_a_request_never_answered_is_one_clear_error_that_a_later_try_may_pass() -> None:
    with pytest.raises(
        TopicCreationError, match="cannot create topic a: no answer within 1s"
    ) as caught:
        _create({"a": [NO_ANSWER]}, timeout_s=1)
    assert caught.value.transient  # a slow cluster (TLS, a loaded machine): --wait asks again


def test_a_broker_gone_between_the_count_and_the_creation_has_the_brokers_counted_again() -> None:
    outcomes: dict[str, list[int | None]] = {"t": [KafkaError.INVALID_REPLICATION_FACTOR, None]}
    brokers_up = [{1: 0, 2: 0, 3: 0}, {1: 0, 3: 0}]  # broker 2 stops in between
    clients: list[RefusingAdmin] = []

    def new_admin() -> RefusingAdmin:
        clients.append(RefusingAdmin(outcomes, []))
        return clients[-1]

    def read_metadata() -> SimpleNamespace:
        return SimpleNamespace(topics={}, brokers=brokers_up.pop(0))

    clock = ManualClock()
    ensure_topic(new_admin, read_metadata, "t", 3, 30, now=clock, sleep=clock.sleep)
    assert [c.replicas for c in clients] == [[3], [2]]


def test_an_existing_topic_is_left_as_it_is() -> None:
    def new_admin() -> RefusingAdmin:
        raise AssertionError("no topic is to be made")

    there = SimpleNamespace(topics={"t": SimpleNamespace(error=None)}, brokers={1: 0})
    ensure_topic(new_admin, lambda: there, "t", 3, 30)


def test_too_few_brokers_for_good_is_one_clear_error_at_the_deadline() -> None:
    outcomes: dict[str, list[int | None]] = {"t": [KafkaError.INVALID_REPLICATION_FACTOR] * 100}
    clock = ManualClock()
    with pytest.raises(TopicCreationError, match="cannot create topic t") as caught:
        ensure_topic(lambda: RefusingAdmin(outcomes, []),
                     lambda: SimpleNamespace(topics={}, brokers={1: 0, 2: 0, 3: 0}),
                     "t", 1, 10, now=clock, sleep=clock.sleep)  # fmt: skip
    assert caught.value.transient  # brokers may come back: --wait asks again
