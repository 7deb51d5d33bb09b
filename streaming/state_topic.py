"""The compacted `zkcdc.state` topic: the alert job writes its state upserts there, and
`zkcdc state show` reads it back to its end, keeping the newest value per key."""

from __future__ import annotations

import json
from typing import Any

from streaming.alert_sinks import ensure_topics, produce_all
from streaming.errors import StreamingError
from zkcdc import logs

COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}


class StateTopicSink:
    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        ensure_topics(bootstrap, [topic], COMPACTED)
        self.topic = topic
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 20,
                "compression.type": "lz4",
            }
        )

    def deliver(self, upserts: list[tuple[str, str | None]]) -> None:
        """Each (key, JSON value or None = tombstone), in order: a later one for the same key
        is the newer state."""
        produce_all(self._producer, self.topic, upserts)

    def close(self) -> None:
        self._producer.flush(30)


def read_state(bootstrap: str, topic: str, timeout_s: float = 30.0) -> dict[str, dict[str, Any]]:
    """The newest value of every key, read from the start of the topic to the end it had when
    the read began."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    quiet = logs.quiet("zkcdc.state.librdkafka")  # a broker down is no news here: the read goes on
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "zkcdc-state-show",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        },
        logger=quiet,
    )
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            raise StreamingError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise StreamingError(
                f"no state topic {topic} on {bootstrap}: run `zkcdc stream alerts` first"
            )
        ends = {}
        for p in found.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        latest: dict[str, dict[str, Any]] = {}
        position = dict.fromkeys(ends, -1)
        while any(position[p] < ends[p] - 1 for p in ends):
            messages = consumer.consume(5000, timeout_s)
            if not messages:
                raise StreamingError(f"reading {topic} stalled: no message in {timeout_s:.0f} s")
            for message in messages:
                if message.error():
                    continue  # end of a partition
                position[message.partition() or 0] = message.offset() or 0
                key = (message.key() or b"").decode()
                value = message.value()
                if value is None:
                    latest.pop(key, None)
                else:
                    latest[key] = json.loads(value)
        return latest
    finally:
        consumer.close()
