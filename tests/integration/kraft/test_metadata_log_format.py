"""Metadata logs written by a real Kafka 3.9.2 and a real Kafka 4.x in KRaft mode: every record
Kafka wrote decodes, and the tree rebuilt from each controller's files is what the Admin API
describes."""

from __future__ import annotations

import contextlib
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from conftest import wait_until

from zkcdc.capture.kraft.metadata_dir import file_entries, load_image, segment_files
from zkcdc.capture.kraft.metadata_image import MetadataImage
from zkcdc.capture.kraft.metadata_records import ControlRecord, MetadataRecord, Undecodable
from zkcdc.capture.kraft.quorum_client import QuorumClient
from zkcdc.ground import waiting
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block
from zkcdc.stack.settings import KAFKA_4_VERSION, KAFKA_VERSION

pytestmark = pytest.mark.integration

WRITTEN_BY_THIS_TEST = {
    "LeaderChangeMessage", "BeginTransactionRecord", "EndTransactionRecord",
    "FeatureLevelRecord", "ZkMigrationStateRecord", "RegisterControllerRecord",
    "RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "TopicRecord", "PartitionRecord",
    "ConfigRecord", "PartitionChangeRecord", "RemoveTopicRecord", "NoOpRecord",
}  # fmt: skip


def _done(futures: dict[Any, Any]) -> None:
    for future in futures.values():
        future.result(timeout=60)


def _stage_changes(admin: AdminClient, stack: LocalStack) -> None:
    """Topics with configs, more partitions, config changes, a deleted topic, a broker's
    controlled shutdown and restart (fenced, ISRs shrunk and expanded)."""
    create_topics(lambda: admin, [
        NewTopic("orders", 3, 3, config={"retention.ms": "86400000", "min.insync.replicas": "2"}),
        NewTopic("audit", 2, 2),
        NewTopic("doomed", 1, 1),
    ], 60)  # fmt: skip
    _done(admin.create_partitions([NewPartitions("audit", 4)]))
    _done(admin.incremental_alter_configs([
        ConfigResource("topic", "orders", incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ]),
        ConfigResource("broker", "2", incremental_configs=[
            ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET),
        ]),
    ]))  # fmt: skip
    _done(admin.delete_topics(["doomed"], operation_timeout=30))
    stack.stop_broker(3, signal.SIGTERM)
    stack.start_broker(3)


def _admin_view(bootstrap: str) -> dict[str, Any]:
    """Brokers, topics (id, replicas, leader, ISR, leader epoch) and dynamic configs; a client
    of its own each time and retried: brokers restarted a moment ago drop connections."""
    for attempt in range(20):
        try:
            return _describe(AdminClient({"bootstrap.servers": bootstrap}))
        except KafkaException:
            if attempt == 19:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def _describe(admin: AdminClient) -> dict[str, Any]:
    cluster = admin.describe_cluster().result(timeout=30)
    names = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    described = admin.describe_topics(TopicCollection(names)) if names else {}
    topics: dict[str, Any] = {}
    wanted: dict[TopicPartition, OffsetSpec] = {}
    for name, future in described.items():
        description = future.result(timeout=30)
        topics[name] = {
            # librdkafka prints a Uuid in plain base64; Kafka in URL-safe base64.
            "id": str(description.topic_id).translate(str.maketrans("+/", "-_")),
            "partitions": {
                p.id: {"replicas": [n.id for n in p.replicas], "leader": p.leader.id,
                       "isr": sorted(n.id for n in p.isr)}
                for p in description.partitions
            },
        }  # fmt: skip
        for p in description.partitions:
            wanted[TopicPartition(name, p.id)] = OffsetSpec.latest()
    if wanted:
        for tp, future in admin.list_offsets(wanted).items():
            topics[tp.topic]["partitions"][tp.partition]["leader_epoch"] = future.result(
                timeout=30
            ).leader_epoch
    configs: dict[tuple[int, str], dict[str, str]] = {}
    # One broker a call: the Admin API takes no more. A broker's answer carries the cluster-wide
    # defaults too (DYNAMIC_DEFAULT_BROKER_CONFIG): they are the resource "" of type broker.
    calls = [[ConfigResource("topic", n) for n in names]] if names else []
    calls += [[ConfigResource("broker", str(n.id))] for n in cluster.nodes]
    own = (ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    for resources in calls:
        for resource, future in admin.describe_configs(resources).items():
            kind = int(resource.restype.value)
            for key, entry in future.result(timeout=30).items():
                if entry.source in own:
                    configs.setdefault((kind, resource.name), {})[key] = entry.value
                elif kind == 4 and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value:
                    configs.setdefault((kind, ""), {})[key] = entry.value
    return {"brokers": sorted(n.id for n in cluster.nodes), "topics": topics, "configs": configs}


def _image_view(image: MetadataImage) -> dict[str, Any]:
    topics = {}
    for name, topic_id in image.topic_ids.items():
        if name.startswith("__"):
            continue
        topics[name] = {
            "id": topic_id,
            "partitions": {
                p: {"replicas": list(s.replicas), "leader": s.leader, "isr": sorted(s.isr),
                    "leader_epoch": s.leader_epoch}
                for p, s in image.partitions[topic_id].items()
            },
        }  # fmt: skip
    configs = {
        (kind, resource): values
        for (kind, resource), values in image.configs.items()
        if not resource.startswith("__")
    }
    brokers = sorted(b.broker_id for b in image.brokers.values() if not b.fenced)
    return {"brokers": brokers, "topics": topics, "configs": configs}


@pytest.fixture(scope="module", params=[KAFKA_VERSION, KAFKA_4_VERSION])
def any_kraft_stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    kraft_stack: LocalStack,  # named: its tests run on the worker that has the folder's stack
) -> Iterator[LocalStack]:
    """The KRaft stack of the folder (Kafka 3.9.2), or a Kafka 4.x one of this module's own
    (one controller, three brokers), stopped when the module ends."""
    if request.param == KAFKA_VERSION:
        yield kraft_stack
        return
    settings = StackSettings(
        state_dir=tmp_path_factory.mktemp("kraft-4-stack"), mode="kraft",
        kafka_version=request.param, controllers=1, kafka_port=free_port_block(3),
        controller_port=free_port_block(1),
    )  # fmt: skip
    stack = LocalStack(settings)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def test_every_record_decodes_and_the_rebuilt_tree_equals_the_admin_api(
    any_kraft_stack: LocalStack,
) -> None:
    kraft_stack = any_kraft_stack
    info = kraft_stack.info()
    admin = AdminClient({"bootstrap.servers": info.bootstrap_servers})
    _stage_changes(admin, kraft_stack)
    wait_until(lambda: all(len(p["isr"]) == len(p["replicas"])
                      for t in _admin_view(info.bootstrap_servers)["topics"].values()
                      for p in t["partitions"].values()),
          timeout_s=90, what="every ISR back to full after the restart")  # fmt: skip
    servers = [(h, int(p)) for h, p in (s.split(":") for s in info.bootstrap_servers.split(","))]
    quorum = QuorumClient(servers)
    try:
        for directory in info.metadata_log_dirs:
            seen: Counter[str] = Counter()
            for _, segment in segment_files(directory):
                for entry in file_entries(segment, lambda d: pytest.fail(f"damaged: {d}")):
                    assert not isinstance(entry, Undecodable), entry
                    assert isinstance(entry, MetadataRecord | ControlRecord)
                    seen[entry.name] += 1
            expected = set(WRITTEN_BY_THIS_TEST)
            if not kraft_stack.settings.kafka_version.startswith("3."):
                expected.discard("ZkMigrationStateRecord")  # Kafka 4 has no migration
            assert set(seen) >= expected, sorted(expected - set(seen))

            def views(d: Any = directory) -> tuple[dict[str, Any], dict[str, Any]]:
                loaded = load_image(d, upto=quorum.status().high_watermark)
                assert not loaded.damage and not loaded.undecodable
                return _image_view(loaded.image), _admin_view(info.bootstrap_servers)

            # The Admin API's view catches up, or the files'; compared below either way.
            with contextlib.suppress(waiting.WaitFailed):
                waiting.wait_until(lambda: (c := views())[0] == c[1], 30,
                                   what="the two views to agree", interval_s=0.5)  # fmt: skip
            rebuilt, described = views()
            assert rebuilt == described, directory
    finally:
        quorum.close()
