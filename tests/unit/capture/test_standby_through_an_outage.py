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


class _SlowTopic(_Consumer):
    """A partition of `end` messages the standby reads `step` at a time, each read taking
    `took_s` of the clock's time (a throttled link, a loaded machine)."""

    def __init__(self, clock: list[float], end: int, step: int, took_s: float) -> None:
        super().__init__()
        self.clock, self.end, self.step, self.took_s = clock, end, step, took_s
        self.offset = 0

    def get_watermark_offsets(self, _: Any, timeout: float) -> tuple[int, int]:
        return 0, self.end

    def assignment(self) -> list[Any]:
        return [SimpleNamespace(partition=0)]

    def position(self, _: Any) -> list[Any]:
        return [SimpleNamespace(partition=0, offset=self.offset)]

    def consume(self, _: int, __: float) -> list[Any]:
        self.clock[0] += self.took_s
        self.offset = min(self.end, self.offset + self.step)
        return []


def _follower(consumer: _SlowTopic) -> TopicFollower:
    kafka = _Kafka()
    kafka.made = consumer
    return TopicFollower(kafka, "zkcdc.changes", "c1", ChangeValueDecoder(),  # type: ignore[arg-type]
                         now=lambda: consumer.clock[0])  # fmt: skip


def test_a_long_topic_read_slowly_is_read_to_its_end_however_long_it_takes() -> None:
    """A takeover late in a long run reads a topic of hours: slowly read (a throttled link,
    a loaded machine) it took longer than the old fixed deadline, and the standby exited."""
    clock = [0.0]
    consumer = _SlowTopic(clock, end=1_000, step=10, took_s=30.0)  # 100 reads: 3,000 s
    _follower(consumer).catch_up(timeout=15.0)
    assert consumer.offset == 1_000 and clock[0] >= 2_900


def test_a_standby_whose_reading_stalls_gives_up_in_one_line() -> None:
    clock = [0.0]
    consumer = _SlowTopic(clock, end=1_000, step=0, took_s=30.0)  # never moves
    with pytest.raises(DeliveryError, match=r"could not read zkcdc\.changes to its end: no prog"):
        _follower(consumer).catch_up(timeout=15.0)
    assert clock[0] <= 200, "gave up after ten timeouts without progress, not later"


class _PausableTopic(_SlowTopic):
    """A `_SlowTopic` that counts its reads and fetches nothing while paused."""

    def __init__(self, clock: list[float], end: int, step: int) -> None:
        super().__init__(clock, end, step, took_s=0.1)
        self.paused, self.reads, self.assigns = False, 0, 0

    def assign(self, _: Any) -> None:
        self.assigns += 1

    def pause(self, _: Any) -> None:
        self.paused = True

    def resume(self, _: Any) -> None:
        self.paused = False

    def consume(self, count: int, timeout: float) -> list[Any]:
        assert not self.paused, "a resting follower fetched"
        self.reads += 1
        return super().consume(count, timeout)


def test_a_follower_kept_across_terms_reads_only_what_came_since_and_rests_while_active() -> None:
    """Each takeover read the whole topic afresh with a new consumer, and each such read left
    the daemon's memory higher: a daemon keeps one follower, which reads on from where it was."""
    consumer = _PausableTopic([0.0], end=1_000, step=100)
    follower = _follower(consumer)
    follower.catch_up(timeout=15.0)
    assert (consumer.offset, consumer.reads) == (1_000, 10)
    follower.rest()  # the daemon is active: nothing fetched meanwhile
    assert consumer.paused
    consumer.end = 1_200  # the active's term
    follower.catch_up(timeout=15.0)
    assert not consumer.paused and consumer.offset == 1_200
    assert consumer.reads == 12 and consumer.assigns == 1, "read the tail, not the topic again"
