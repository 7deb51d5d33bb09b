"""One Kafka topic read from its beginning and then followed: every partition assigned (no
consumer group offsets, no commits), so a reader keeps nothing a restart would lose."""

from __future__ import annotations

from typing import Any

from zkcdc.ground import waiting
from zkcdc.ground.connect_timeout import connect_timeout_s
from zkcdc.ground.kafka_connection import KafkaConnection, close_consumer
from zkcdc.view.errors import ViewError


class TopicFollower:
    def __init__(self, kafka: KafkaConnection, topic: str, wait_s: float = 0.0) -> None:
        """`wait_s`: how long a topic that does not exist yet is waited for (0: an error at
        once; the UI waits, since the alert job creates its topics when it starts)."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        self.topic = topic
        # EOF events: where a partition's readable end is (a transactional topic's last
        # offsets are commit markers, which no message stands at).
        self._consumer = kafka.consumer(
            "zkcdc-view", {"auto.offset.reset": "earliest", "enable.partition.eof": True}, True
        )
        self._ends: dict[int, int] = {}  # non-empty partition -> its end at the start
        self._assigned: list[int] = []
        self._read_to: dict[int, int] = {}  # partition -> the offset after the newest read
        last: list[tuple[str, KafkaException | None]] = []  # why the latest look found none

        def found() -> list[int] | None:
            # A topic the alert job has just made is listed before its partitions have
            # leaders; their offsets are asked again until the wait is spent.
            try:
                partitions = self._partitions()
                if partitions is not None:
                    self._ends = self._ends_of(partitions)
                    return partitions
                last[:] = [(f"no topic {topic} on {kafka.describe()}", None)]
            except KafkaException as exc:
                last[:] = [(f"cannot read {topic} from {kafka.describe()}: {exc}", exc)]
            return None

        try:
            try:
                partitions = waiting.wait_until(
                    found, wait_s, what=f"topic {topic}", interval_s=0.5
                )
            except waiting.WaitFailed:
                reason, cause = last[0]
                raise ViewError(reason) from cause
            self._assigned = partitions
            self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        except KafkaException as exc:
            close_consumer(self._consumer)
            raise ViewError(f"cannot read {topic} from {kafka.describe()}: {exc}") from exc
        except BaseException:
            close_consumer(self._consumer)
            raise

    def _partitions(self) -> list[int] | None:
        found = self._consumer.list_topics(self.topic, timeout=connect_timeout_s(10.0)).topics.get(
            self.topic
        )
        if found is None or found.error is not None or not found.partitions:
            return None
        return sorted(found.partitions)

    def _ends_of(self, partitions: list[int]) -> dict[int, int]:
        """Each non-empty partition's end when the follower starts: read to there is caught up."""
        from confluent_kafka import TopicPartition

        ends: dict[int, int] = {}
        for p in partitions:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=connect_timeout_s(10.0)
            )
            if high > low:
                ends[p] = high
        return ends

    @property
    def caught_up(self) -> bool:
        """Everything the topic held when the follower started has been read."""
        return all(self._read_to.get(p, -1) >= end for p, end in self._ends.items())

    def at_end(self) -> bool:
        """Every partition read up to its end as Kafka last told it (the high watermark of the
        newest fetch answer: a message written since counts once it is fetched)."""
        from confluent_kafka import KafkaException, TopicPartition

        for p in self._assigned:
            try:
                watermarks = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), cached=True
                )
            except KafkaException:  # not fetched from yet: not known to be at the end
                return False
            if watermarks is None:
                return False
            low, high = watermarks
            read_to = self._read_to.get(p)
            if read_to is None:  # nothing read from it: at its end only if it holds nothing
                if not (high == 0 or 0 <= low == high):
                    return False
            elif read_to < high:
                return False
        return True

    def poll(self, timeout_s: float, most: int = 10_000) -> list[Any]:
        """The next messages (errors left out), at most `most`, waiting up to `timeout_s`."""
        from confluent_kafka import KafkaError

        out = []
        for message in self._consumer.consume(most, timeout_s):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    p = message.partition()
                    self._read_to[p] = max(self._read_to.get(p, 0), message.offset())
                continue
            out.append(message)
            self._read_to[message.partition()] = message.offset() + 1
        return out

    def close(self) -> None:
        close_consumer(self._consumer)
