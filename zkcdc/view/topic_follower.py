"""One Kafka topic read from its beginning and then followed: every partition assigned (no
consumer group offsets, no commits), so a reader keeps nothing a restart would lose."""

from __future__ import annotations

import time
from typing import Any

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.view.errors import ViewError


class TopicFollower:
    def __init__(self, kafka: KafkaConnection, topic: str, wait_s: float = 0.0) -> None:
        """`wait_s`: how long a topic that does not exist yet is waited for (0: an error at
        once; the UI waits, since the alert job creates its topics when it starts)."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        self.topic = topic
        self._consumer = kafka.consumer("zkcdc-view", {"auto.offset.reset": "earliest"}, True)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                found = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
                if found is not None and found.error is None and found.partitions:
                    break
                if time.monotonic() >= deadline:
                    raise ViewError(f"no topic {topic} on {kafka.describe()}")
                time.sleep(0.5)
            partitions = sorted(found.partitions)
            self._ends: dict[int, int] = {}
            for p in partitions:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=10
                )
                if high > low:
                    self._ends[p] = high
            self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        except KafkaException as exc:
            self._consumer.close()
            raise ViewError(f"cannot read {topic} from {kafka.describe()}: {exc}") from exc
        except BaseException:
            self._consumer.close()
            raise

    @property
    def caught_up(self) -> bool:
        """Everything the topic held when the follower started has been read."""
        return not self._ends

    def poll(self, timeout_s: float, most: int = 10_000) -> list[Any]:
        """The next messages (errors left out), at most `most`, waiting up to `timeout_s`."""
        out = []
        for message in self._consumer.consume(most, timeout_s):
            if message.error():
                continue
            out.append(message)
            end = self._ends.get(message.partition())
            if end is not None and message.offset() + 1 >= end:
                del self._ends[message.partition()]
        return out

    def close(self) -> None:
        self._consumer.close()
