"""What `zkcdc stack status` shows of the cluster: brokers, controller and epoch, topics."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcdc.capture.kraft.metadata_image import MetadataImage
from zkcdc.stack.probes import registered_brokers


@dataclass(frozen=True)
class BrokerEntry:
    broker_id: int
    endpoint: str
    epoch: int


@dataclass(frozen=True)
class TopicEntry:
    name: str
    partitions: int
    replication_factor: int


@dataclass(frozen=True)
class ClusterView:
    """What `zkcdc stack status` shows of the cluster, read from ZooKeeper."""

    brokers: tuple[BrokerEntry, ...]
    controller_id: int | None
    controller_epoch: int | None
    topics: tuple[TopicEntry, ...]


def read_cluster_view(client: KazooClient, chroot: str) -> ClusterView:
    brokers = []
    for broker_id in sorted(registered_brokers(client, chroot)):
        try:
            data, stat = client.get(f"{chroot}/brokers/ids/{broker_id}")
        except NoNodeError:
            continue
        brokers.append(BrokerEntry(broker_id, broker_endpoint(data), stat.czxid))
    controller = _read_json(client, f"{chroot}/controller")
    epoch = _read_json(client, f"{chroot}/controller_epoch")
    topics = []
    with contextlib.suppress(NoNodeError):
        for name in sorted(client.get_children(f"{chroot}/brokers/topics")):
            assignment = _read_json(client, f"{chroot}/brokers/topics/{name}")
            partitions = assignment.get("partitions", {}) if isinstance(assignment, dict) else {}
            rf = max((len(r) for r in partitions.values()), default=0)
            topics.append(TopicEntry(name, len(partitions), rf))
    return ClusterView(
        brokers=tuple(brokers),
        controller_id=controller.get("brokerid") if isinstance(controller, dict) else None,
        controller_epoch=epoch if isinstance(epoch, int) else None,
        topics=tuple(topics),
    )


def kraft_cluster_view(image: MetadataImage) -> ClusterView:
    """The same view of a KRaft cluster, from its metadata log: unfenced brokers (epoch: the
    broker epoch), the quorum's leader and epoch."""
    brokers = [
        BrokerEntry(b.broker_id, f"{b.endpoints[0][0]}://{b.endpoints[0][1]}:{b.endpoints[0][2]}"
                    if b.endpoints else "?", b.epoch)
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
        if not b.fenced
    ]  # fmt: skip
    topics = []
    for name, topic_id in sorted(image.topic_ids.items()):
        parts = image.partitions[topic_id]
        rf = max((len(p.replicas) for p in parts.values()), default=0)
        topics.append(TopicEntry(name, len(parts), rf))
    leader = image.quorum.leader
    return ClusterView(
        brokers=tuple(brokers),
        controller_id=leader if leader >= 0 else None,
        controller_epoch=image.quorum.epoch or None,
        topics=tuple(topics),
    )


def broker_endpoint(registration: bytes) -> str:
    """The first endpoint of a `/brokers/ids/N` registration (any version), or `?`."""
    try:
        parsed = json.loads(registration)
    except ValueError:
        return "?"
    endpoints = parsed.get("endpoints") or []
    if endpoints:
        return str(endpoints[0])
    return f"{parsed.get('host', '?')}:{parsed.get('port', '?')}"


def _read_json(client: KazooClient, path: str) -> object:
    try:
        data, _ = client.get(path)
        return json.loads(data)
    except (NoNodeError, ValueError, TypeError):
        return None
