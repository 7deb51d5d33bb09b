"""A standby follows the changes topic while it waits: brokers that do not answer (all down, B6)
are waited out, as the active waits them out; a refusal a wait would not cure is one line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.capture.delivery.topic_follower import TopicFollower
from zkcdc.ground.change_values import ChangeValueDecoder


class _Consumer:
    def __init__(self) -> None:
        self.failure: KafkaException | None = None
        self.assigned = False

    def list_topics(self, topic: str, timeout: float) -> Any:
        if self.failure is not None:
            raise self.failure
        found = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics={topic: found})

    def assign(self, _: Any) -> None:
        self.assigned = True

    def consume(self, _: int, __: float) -> list[Any]:
        if self.failure is not None:
            raise self.failure
        return []


class _Kafka:
    def __init__(self) -> None:
        self.made = _Consumer()

    def consumer(self, *_: Any, **__: Any) -> _Consumer:
        return self.made


@pytest.mark.parametrize(
    "code", [KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT]
)
def test_a_standby_waits_out_brokers_that_do_not_answer(code: int) -> None:
    kafka = _Kafka()
    follower = TopicFollower(kafka, "zkcdc.changes", "c1", ChangeValueDecoder())  # type: ignore[arg-type]
    kafka.made.failure = KafkaException(KafkaError(code, "Failed to get metadata"))
    assert follower.poll(0.01) == 0  # before it could assign: the metadata request failed
    kafka.made.failure = None
    assert follower.poll(0.01) == 0 and kafka.made.assigned
    kafka.made.failure = KafkaException(KafkaError(code, "Failed to consume"))
    assert follower.poll(0.01) == 0  # assigned, then the brokers went


def test_a_refusal_no_wait_cures_stops_the_standby_in_one_line() -> None:
    kafka = _Kafka()
    follower = TopicFollower(kafka, "zkcdc.changes", "c1", ChangeValueDecoder())  # type: ignore[arg-type]
    kafka.made.failure = KafkaException(
        KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")
    )
    with pytest.raises(DeliveryError, match=r"^standby cannot read zkcdc\.changes: .*authoriz"):
        follower.poll(0.01)
