"""Readers on the real stack with messages anyone could write onto zkcdc's topics: `state show`
and `alerts tail` skip and count what is no record, name where it was, and show the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from zkcdc.streaming.rules.alert_records import Alert

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in messages:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0


def _zkcdc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkcdc", *args], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


BROKER = {"cluster": "c1", "kind": "broker", "broker_id": 1, "alive": True, "endpoints": [],
          "epoch": 5, "preferred_partitions": 0, "preferred_not_led": 0, "updated_ms": 1}  # fmt: skip
PARTITION = {"cluster": "c1", "kind": "partition", "topic": "t", "partition": 0, "replicas": [1],
             "leader": 1, "isr": [1], "leader_epoch": 3, "offline": False,
             "under_replicated": False, "updated_ms": 1}  # fmt: skip


def test_state_show_skips_a_non_json_value_names_where_it_is_and_shows_the_rest(
    cluster: Any, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1, replication_factor=1)
    _produce(cluster.bootstrap_servers, topic, [
        (b"c1/broker/1", json.dumps(BROKER).encode()),
        (b"c1/broker/2", b"\xff not json {"),
        (b"\xfe\xff", b"{}"),
        (b"c1/partition/t/0", json.dumps(PARTITION).encode()),
    ])  # fmt: skip
    shown = _zkcdc("state", "show", "--bootstrap-servers", cluster.bootstrap_servers,
                   "--state-topic", topic, "--json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert [json.loads(line)["kind"] for line in shown.stdout.splitlines()] == [
        "broker",
        "partition",
    ]
    assert f"{topic}: 2 unreadable message(s) skipped" in shown.stderr
    warnings = [
        json.loads(line)
        for line in shown.stderr.splitlines()
        if "unreadable message skipped" in line
    ]
    assert [(w["topic"], w["partition"], w["offset"]) for w in warnings] == [
        (topic, 0, 1),
        (topic, 0, 2),
    ]
    tables = _zkcdc("state", "show", "--bootstrap-servers", cluster.bootstrap_servers,
                    "--state-topic", topic)  # fmt: skip
    assert tables.returncode == 0 and "1/1 brokers alive" in tables.stdout, tables.stderr


def test_alerts_tail_skips_what_is_no_alert_and_shows_every_alert(
    cluster: Any, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1, replication_factor=1)
    alert = Alert("a1", "broker_down", "critical", "FIRING", "c1", "broker/2", 10, None, "gone")
    later = Alert("a1", "broker_down", "critical", "RESOLVED", "c1", "broker/2", 10, 20, "back")
    _produce(cluster.bootstrap_servers, topic, [
        (b"a1", alert.as_text().encode()),
        (None, b'{"alert_id": "x", "status": "FIRING", "started_ms": "soon"}'),
        (b"k", None),
        (b"a1", later.as_text().encode()),
    ])  # fmt: skip
    for flags in (["--json"], []):
        done = _zkcdc("alerts", "tail", "--bootstrap-servers", cluster.bootstrap_servers,
                      "--alerts-topic", topic, *flags)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"{topic}: 2 unreadable message(s) skipped" in done.stderr
        assert len(done.stdout.splitlines()) == 2, done.stdout
    assert "RESOLVED" in done.stdout
