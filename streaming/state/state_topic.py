"""The compacted `zkcdc.state` topic: the alert job writes its state upserts there, and
`zkcdc state show` reads it back to its end, keeping the newest value per key."""

from __future__ import annotations

from typing import Any

from zkcdc.ground.connect_timeout import connect_timeout_s
from zkcdc.ground.kafka_connection import KafkaConnection, KafkaConnectionError, NoSuchTopic
from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.sinks.kafka_topic import ensure_topics, produce_all, sink_producer
from zkcdc.streaming.state.state_values import state_entry

COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}


class StateTopicSink:
    def __init__(self, kafka: KafkaConnection, topic: str) -> None:
        ensure_topics(kafka, [topic], COMPACTED)
        self.topic = topic
        self._producer = sink_producer(kafka, {"linger.ms": 20, "compression.type": "lz4"})

    def deliver(self, upserts: list[tuple[str, str | None]]) -> None:
        """Each (key, JSON value or None = tombstone), in order: a later one for the same key
        is the newer state."""
        produce_all(self._producer, self.topic, upserts)

    def close(self) -> None:
        self._producer.flush(30)


def read_state(
    kafka: KafkaConnection,
    topic: str,
    timeout_s: float | None = None,
    skipped: UnreadableMessages | None = None,
) -> dict[str, dict[str, Any]]:
    """The newest value of every key, read from the start of the topic to the end it had when
    the read began. A message that is no state record is skipped and counted in `skipped`."""
    latest: dict[str, dict[str, Any]] = {}
    unreadable = skipped if skipped is not None else UnreadableMessages("state show")

    def take(message: Any) -> None:
        entry = unreadable.read(message, state_entry)
        if entry is None:
            return
        key, value = entry
        if value is None:
            latest.pop(key, None)
        else:
            latest[key] = value

    try:
        kafka.read_to_end(
            topic, take, None, timeout_s or connect_timeout_s(), group="zkcdc-state-show"
        )
    except NoSuchTopic as exc:
        raise StreamingError(
            f"no state topic {topic} on {kafka.describe()}: run `zkcdc stream alerts` first"
        ) from exc
    except KafkaConnectionError as exc:
        raise StreamingError(str(exc)) from exc
    return latest
