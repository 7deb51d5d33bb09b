"""What the changes topic already holds and takes, asked of Kafka: the seqs a cluster's earlier
runs got there (a restart resends only the rest), and the largest record it accepts."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ConfigResource,
    ResourceType,
)

from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.capture.delivery.publisher import CLUSTER_HEADER, SEQ_HEADER
from zkcdc.ground.kafka_connection import KafkaConnection, KafkaConnectionError, NoSuchTopic
from zkcdc.ground.unreadable_messages import UnreadableMessages


def topic_max_message_bytes(kafka: KafkaConnection, topic: str, timeout: float) -> int | None:
    """The topic's `max.message.bytes` (its own or the broker's default), None if unknown
    (not allowed to describe it, say)."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = kafka.admin()  # referenced until answered
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout)
        return int(configs["max.message.bytes"].value)
    except (KafkaException, TimeoutError, KeyError, ValueError, TypeError):
        return None


def delivered_seqs(
    kafka: KafkaConnection, topic: str, cluster: str, since_ms: int, timeout: float
) -> set[int]:
    """The seqs of `cluster` already on the topic from `since_ms` on (by record timestamp):
    what a previous run got acknowledged, or produced without hearing the ack, before it died."""
    seen: set[int] = set()
    skipped = UnreadableMessages(f"delivered seqs of {topic}")

    def seq_of(message: Any) -> int | None:
        headers = dict(message.headers() or [])
        seq = headers.get(SEQ_HEADER)
        if headers.get(CLUSTER_HEADER) != cluster.encode():
            return None
        if not isinstance(seq, bytes):
            raise ValueError(f"{SEQ_HEADER} header is {seq!r}")
        return int(seq.decode("ascii"))

    def take(message: Any) -> None:
        seq = skipped.read(message, seq_of)
        if seq is not None:
            seen.add(seq)

    try:
        kafka.read_to_end(topic, take, since_ms, timeout, group="zkcdc-reconcile")
    except NoSuchTopic:
        return seen
    except KafkaConnectionError as exc:
        raise DeliveryError(str(exc)) from exc
    return seen
