"""Memory stays bounded however long Kafka is away: past the publisher's room, records wait in
the event log and are read back from it when Kafka takes them again; each goes out once, in seq
order. The same path serves a restart's backlog (records Kafka already has left out)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from zkcdc.capture.delivery.event_log import Damage, EventLogWriter
from zkcdc.capture.delivery.kafka_feed import KafkaFeed
from zkcdc.capture.delivery.log_tail import LogTail
from zkcdc.capture.delivery.publisher import SEQ_HEADER, Publisher
from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.ground.change_types import Op
from zkcdc.ground.kafka_connection import KafkaConnection


def _no_damage(damage: Damage) -> None:
    raise AssertionError(f"damage reported: {damage.describe()}")


QUEUE = 100  # librdkafka's queue, as small as the test wants it


class FakeProducer:
    """librdkafka as the feed sees it: a bounded queue; away, it takes nothing."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.up = False
        self.queued: list[tuple[int, Any]] = []
        self.delivered: list[int] = []

    def produce(self, topic: str, key: bytes, value: bytes, timestamp: int, headers: Any,
                on_delivery: Any, partition: int = -1) -> None:  # fmt: skip
        if not self.up or len(self.queued) >= QUEUE:
            raise BufferError("queue full")
        self.queued.append((int(dict(headers)[SEQ_HEADER]), on_delivery))

    def poll(self, timeout: float) -> int:
        if self.up:
            for seq, callback in self.queued:
                self.delivered.append(seq)
                callback(None, None)
            self.queued.clear()
        return 0

    def flush(self, timeout: float) -> int:
        return self.poll(timeout)


def _records(first: int, count: int) -> list[dict[str, Any]]:
    return [
        ChangeRecord(
            "c1",
            seq,
            Op.UPDATE,
            f"/x/{seq % 7}",
            Znode(b"v" * 300, 1),
            Znode(b"w" * 300, 2),
            seq,
            seq,
            seq,
        ).to_avro()
        for seq in range(first, first + count)
    ]


def _setup(tmp_path: Path) -> tuple[EventLogWriter, Publisher, FakeProducer, KafkaFeed]:
    writer = EventLogWriter(tmp_path / "events", "c1", now=lambda: 0.0, max_bytes=256 * 1024)
    producers: list[FakeProducer] = []

    def factory(config: dict[str, Any]) -> FakeProducer:
        producers.append(FakeProducer(config))
        return producers[0]

    codec = SingleObjectCodec()
    publisher = Publisher(
        KafkaConnection(bootstrap_servers="k"),
        "t",
        codec.encode,
        producer_factory=factory,
        max_waiting=500,
    )
    feed = KafkaFeed(publisher, lambda seq: LogTail(tmp_path / "events", "c1", seq, _no_damage))
    return writer, publisher, producers[0], feed


def test_a_long_outage_keeps_memory_bounded_and_then_every_record_goes_out_once_in_order(
    tmp_path: Path,
) -> None:
    writer, publisher, producer, feed = _setup(tmp_path)
    logged = 0
    for _turn in range(400):  # 20,000 records while Kafka is away
        values = _records(logged + 1, 50)
        writer.append(values)  # across several rotated files
        logged += 50
        feed.give(values, None)
        publisher.poll(0)
        feed.refill(logged)
        assert publisher.backlog <= publisher.max_waiting + QUEUE, "memory grows with the outage"
    assert feed.waiting_in_log
    producer.up = True
    for _tick in range(1_000):
        publisher.poll(0)
        feed.refill(logged)
        if not feed.waiting_in_log and publisher.backlog == 0:
            break
        assert publisher.backlog <= publisher.max_waiting + QUEUE
    assert producer.delivered == list(range(1, logged + 1))
    assert publisher.acked_through == logged
    # Back to giving directly once caught up.
    values = _records(logged + 1, 10)
    writer.append(values)
    feed.give(values, None)
    publisher.poll(0)
    assert producer.delivered[-10:] == list(range(logged + 1, logged + 11))


def test_a_restart_backlog_leaves_out_what_kafka_already_has(tmp_path: Path) -> None:
    writer, publisher, producer, feed = _setup(tmp_path)
    writer.append(_records(1, 3_000))
    producer.up = True
    feed.resume(1_000, on_kafka={1_001, 1_500, 2_999})
    for _tick in range(100):
        publisher.poll(0)
        feed.refill(3_000)
        if not feed.waiting_in_log and publisher.backlog == 0:
            break
    expected = [s for s in range(1_001, 3_001) if s not in (1_001, 1_500, 2_999)]
    assert producer.delivered == expected


def test_a_refill_stops_after_its_time_budget_and_the_next_turns_go_on_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """librdkafka can take 100,000 records at once: read back from the log in one go they
    would hold the capture's loop (and its ZooKeeper session) for seconds."""
    monkeypatch.setattr(sys.modules[__name__], "QUEUE", 100_000)
    writer, _, _, _ = _setup(tmp_path)
    producer = FakeProducer({})
    publisher = Publisher(KafkaConnection(bootstrap_servers="k"), "t", SingleObjectCodec().encode,
                          producer_factory=lambda config: producer, max_waiting=10_000)  # fmt: skip
    now = [0.0]

    def clock() -> float:
        now[0] += 0.03  # each look at the clock: 30 ms of work went by
        return now[0]

    feed = KafkaFeed(
        publisher,
        lambda seq: LogTail(tmp_path / "events", "c1", seq, _no_damage),
        budget_s=0.05,
        clock=clock,
    )
    writer.append(_records(1, 5_000))
    producer.up = True
    feed.resume(0, on_kafka=set())
    feed.refill(5_000)
    moved = publisher.backlog + len(producer.delivered)
    assert 0 < moved <= 2_000, f"one turn moved {moved} records past its budget"
    turns = 1
    while feed.waiting_in_log or publisher.backlog:
        publisher.poll(0)
        feed.refill(5_000)
        turns += 1
        assert turns < 100, "the log does not drain"
    assert producer.delivered == list(range(1, 5_001))
