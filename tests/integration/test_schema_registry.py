"""Registry mode against a real schema registry (Apicurio, Confluent's API): capture and replay
write Confluent's wire format, a plain registry-aware consumer reads it, the alert job raises
alerts from it, and the registry refuses a breaking change to the schema."""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from alerts_harness import ChangesProducer, DeadLetters
from confluent_kafka import OFFSET_BEGINNING, DeserializingConsumer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from conftest import wait_until
from kafka_tree import controller_id, partition_state, registered_brokers

from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.schema_files import current_schema
from zkcdc.stack.schema_registry import SchemaRegistry
from zkcdc.streaming.state.state_topic import read_state

pytestmark = pytest.mark.integration
FIXTURE_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "event_log_v1"


def registry_records(
    bootstrap: str, topic: str, url: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """What a consumer that knows nothing of zkcdc but the registry reads off the topic, until
    `done` says it has enough."""
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"plain-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "value.deserializer": AvroDeserializer(SchemaRegistryClient({"url": url})),
    })  # fmt: skip
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[dict[str, Any]] = []

        def enough() -> bool:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                records.append(message.value())
            return done(records)

        wait_until(enough, 90, 0, what="the records through the registry")
        return records
    finally:
        consumer.close()


@pytest.mark.stops_brokers
def test_capture_in_registry_mode_is_read_by_a_registry_consumer_and_raises_alerts(
    cluster, kafka_zk, new_topic, start_capture, changes_topic, start_alert_job, schema_registry
):
    url = schema_registry.url
    topic = new_topic(partitions=1, replication_factor=3)
    wait_until(lambda: len((partition_state(kafka_zk, topic, 0) or {}).get("isr", [])) == 3,
               what="a full ISR")  # fmt: skip
    daemon = start_capture(cluster.zookeeper_hosts + cluster.chroot, "--cluster", "reg",
                           "--schema-registry", url, publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")

    path = f"/brokers/topics/{topic}"
    records = registry_records(cluster.bootstrap_servers, changes_topic.topic, url,
                               lambda got: any(r["path"] == path for r in got))  # fmt: skip
    assert {r["cluster"] for r in records} == {"reg"}
    assignment = next(r for r in records if r["path"] == path)["after"]["data"]  # the znode's
    assert json.loads(assignment)["partitions"] == {"0": ANY}

    client = SchemaRegistryClient({"url": url})
    subject = f"{changes_topic.topic}-value"
    assert client.get_compatibility(subject) == "FULL_TRANSITIVE"
    broken = copy.deepcopy(current_schema("ChangeRecord"))
    broken["fields"].append({"name": "region", "type": "string"})  # no default
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(broken), "AVRO"))
    assert refused.value.http_status_code == 409

    job, alerts = start_alert_job(changes_topic, "--schema-registry", url,
                                  "--rule", "under_replicated_for_ms=1000")  # fmt: skip
    follower = next(b for b in cluster.broker_ids if b != controller_id(kafka_zk))
    cluster.stop_broker(follower, signal.SIGTERM)
    try:
        fired = alerts.wait_for(
            lambda a: a["rule"] == "under_replicated" and a["entity"] == f"{topic}/0"
            and a["status"] == "FIRING", f"under_replicated FIRING for {topic}/0", 150, job,
        )  # fmt: skip
    finally:
        cluster.start_broker(follower)
    assert fired["cluster"] == "reg"
    # The follower's return reaches the state topic through capture and the job: waited for.
    wait_until(
        lambda: show_state(cluster.bootstrap_servers, job.option("--state-topic"), "reg")
        .startswith("cluster reg: 3/3 brokers alive"), 120, 1.0, what="3/3 brokers in the state",
    )  # fmt: skip

    # The same topic may hold single-object values too (a capture before the switch): they
    # decode beside the Confluent ones; what is neither goes to the dead letters, with why.
    assigned = next(r for r in records if r["path"] == path)
    other = SingleObjectCodec().encode({**assigned, "cluster": "single", "seq": 1})
    with ChangesProducer(cluster.bootstrap_servers) as producer:
        producer.send(changes_topic.topic, other)
        producer.send(changes_topic.topic, b"\x00\x00\x01\x00\x00garbage")
    dead = DeadLetters(cluster.bootstrap_servers, f"{changes_topic.topic}.deadletter")
    letter = dead.wait_for(lambda d: "schema id 65536" in d["reason"], "the dead letter", 120, job)
    assert base64.b64decode(letter["value_base64"]).endswith(b"garbage")
    state = KafkaConnection(bootstrap_servers=cluster.bootstrap_servers)

    def single_kept() -> bool:  # read in this process: one `state show` once it is there
        kept = read_state(state, job.option("--state-topic"), 10)
        return any(key.startswith("single/") for key in kept)

    wait_until(single_kept, 120, 1.0, what="the single-object record's cluster in the state")
    shown = show_state(cluster.bootstrap_servers, job.option("--state-topic"), "single")
    assert "cluster single:" in shown and "1 topics" in shown, shown
    wait_until(lambda: follower in registered_brokers(kafka_zk), what="the follower back")
    assert job.stop() == 0, job.tail()


def show_state(bootstrap: str, topic: str, name: str, check: bool = True) -> str:
    shown = subprocess.run(
        [sys.executable, "-m", "zkcdc", "state", "show", "--bootstrap-servers", bootstrap,
         "--state-topic", topic, "--cluster", name],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.returncode == 0 or not check, shown.stderr
    return shown.stdout if shown.returncode == 0 else shown.stderr


def test_replay_into_kafka_in_registry_mode_writes_what_a_registry_consumer_reads(
    cluster, schema_registry: SchemaRegistry, tmp_path: Path
):
    topic = f"zkcdc.replayed.{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [sys.executable, "-m", "zkcdc", "replay", str(FIXTURE_LOG), "--bootstrap-servers",
         cluster.bootstrap_servers, "--topic", topic, "--schema-registry", schema_registry.url,
         "--checkpoint", str(tmp_path / "replay.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    logged = json.loads((FIXTURE_LOG.parent / "event_log_v1.json").read_text())
    records = registry_records(cluster.bootstrap_servers, topic, schema_registry.url,
                               lambda got: len(got) >= logged["records"])  # fmt: skip
    assert sorted(r["seq"] for r in records) == list(range(1, logged["records"] + 1))


def test_an_unreachable_registry_is_one_clear_line(cluster, tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "zkcdc", "replay", str(FIXTURE_LOG), "--bootstrap-servers",
         cluster.bootstrap_servers, "--topic", f"zkcdc.unreached.{uuid.uuid4().hex[:8]}",
         "--schema-registry", "http://127.0.0.1:9/apis/ccompat/v6",
         "--checkpoint", str(tmp_path / "replay.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("zkcdc: error: schema registry http://127.0.0.1:9"), done.stderr
    assert "Traceback" not in done.stderr
