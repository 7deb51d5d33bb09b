"""The bytes Kafka 3.9 (ZooKeeper mode) writes into each znode it owns, as pure functions.

Kafka encodes a Scala map with Jackson: small maps keep insertion order, larger ones come out
in hash order. The orders here are the ones a real 3.9.2 cluster wrote on the local stack, so
the simulator's bytes read like Kafka's, not only parse like them. The parity test compares the
two trees znode by znode kind."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any


def _json(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def kafka_uuid(rng: random.Random) -> str:
    """Kafka's `Uuid.toString()`: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(rng.randbytes(16)).rstrip(b"=").decode()


def cluster_id(cluster: str) -> bytes:
    return _json({"version": "1", "id": cluster})


def feature() -> bytes:
    """`/feature`: FeatureZNode v2, status enabled, no finalized features (ZooKeeper mode)."""
    return _json({"features": {}, "version": 2, "status": 1})


def controller(broker_id: int, timestamp_ms: int) -> bytes:
    """`/controller` v2: a ZooKeeper-mode controller writes kraftControllerEpoch -1."""
    return _json(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": -1,
        }
    )


def controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def broker_registration(
    broker_id: int, host: str, port: int, timestamp_ms: int, rack: str | None = None
) -> bytes:
    """`/brokers/ids/N` v5 with one PLAINTEXT listener."""
    del broker_id  # the id is the znode's name, not part of its data
    obj: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://{host}:{port}"],
        "jmx_port": -1,
        "port": port,
        "host": host,
        "version": 5,
        "timestamp": str(timestamp_ms),
    }
    if rack is not None:
        obj["rack"] = rack
    return _json(obj)


def topic_assignment(
    replicas: Mapping[int, Sequence[int]],
    topic_id: str,
    adding: Mapping[int, Sequence[int]] | None = None,
    removing: Mapping[int, Sequence[int]] | None = None,
) -> bytes:
    """`/brokers/topics/T` v3: replicas per partition, the topic id, reassignment in flight."""

    def by_name(parts: Mapping[int, Sequence[int]] | None) -> dict[str, list[int]]:
        return {str(p): list(r) for p, r in sorted((parts or {}).items())}

    return _json(
        {
            "partitions": by_name(replicas),
            "topic_id": topic_id,
            "adding_replicas": by_name(adding),
            "removing_replicas": by_name(removing),
            "version": 3,
        }
    )


def partition_state(
    leader: int, leader_epoch: int, isr: Sequence[int], controller_epoch: int
) -> bytes:
    """`.../partitions/P/state` v1."""
    return _json(
        {
            "controller_epoch": controller_epoch,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": list(isr),
        }
    )


def entity_config(config: Mapping[str, str]) -> bytes:
    """`/config/<type>/<name>` v1."""
    return _json({"version": 1, "config": dict(config)})


def config_change(entity_type: str, entity_name: str) -> bytes:
    """`/config/changes/config_change_NNNNNNNNNN` v2: which entity to reload."""
    return _json({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def reassignment(moves: Sequence[tuple[str, int, Sequence[int]]]) -> bytes:
    """`/admin/reassign_partitions` v1: (topic, partition, target replicas)."""
    return _json(
        {
            "version": 1,
            "partitions": [{"topic": t, "partition": p, "replicas": list(r)} for t, p, r in moves],
        }
    )


def log_dir_event(broker_id: int) -> bytes:
    """`/log_dir_event_notification/log_dir_event_NNNNNNNNNN` v1: a log directory of the broker
    failed (event 1, `LogDirEventNotificationHandler.LogDirFailureEvent`)."""
    return _json({"version": 1, "broker": broker_id, "event": 1})


def consumer_registration(subscription: Mapping[str, int], timestamp_ms: int) -> bytes:
    """`/consumers/G/ids/C` as pre-2.0 (ZooKeeper-based) consumers wrote it."""
    return _json(
        {
            "version": 1,
            "subscription": dict(subscription),
            "pattern": "static",
            "timestamp": str(timestamp_ms),
        }
    )


def consumer_owner(thread_id: str) -> bytes:
    """`/consumers/G/owners/T/P`: the owning thread, `consumer.id-N`."""
    return thread_id.encode()


def consumer_offset(offset: int) -> bytes:
    """`/consumers/G/offsets/T/P`: the committed offset as a bare decimal."""
    return str(offset).encode()
