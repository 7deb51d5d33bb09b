"""The dead-letter topic (`<changes topic>.deadletter`): each message of the changes topic that
is no change record, keyed by its place (topic/partition/offset), its value a JSON object with
the place, the reason and the raw value in base64. The alert query's micro-batch carries them
(change_source.changes_with_dead_letters) and its delivery sends them here."""

from __future__ import annotations

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.streaming.sinks.kafka_topic import ensure_topics, produce_all, sink_producer


class DeadLetterTopic:
    def __init__(self, kafka: KafkaConnection, topic: str) -> None:
        ensure_topics(kafka, [topic])
        self.topic = topic
        self._producer = sink_producer(kafka)

    def deliver(self, letters: list[tuple[str, str | None]]) -> None:
        """Each (key, letter JSON); at least once: a re-run micro-batch sends its again."""
        if letters:
            produce_all(self._producer, self.topic, letters)

    def close(self) -> None:
        self._producer.flush(30)
