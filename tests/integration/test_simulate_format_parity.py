"""The simulator writes what Kafka writes: a small cluster built by `zkcdc simulate build` next to
the tree real Kafka 3.9 wrote on the local stack for the same shape, compared znode by znode
kind — JSON keys and value types, `version` fields, ephemeral or not, and the skeleton."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from conftest import wait_until
from kazoo.client import KazooClient

from zkcdc.ground import waiting

pytestmark = pytest.mark.integration


def shape(value: Any) -> Any:
    """A JSON value with its leaves replaced by their types; `version` fields keep their value."""
    if isinstance(value, dict):
        return {k: (v if k == "version" else shape(v)) for k, v in value.items()}
    if isinstance(value, list):
        return ["list", *sorted({json.dumps(shape(v)) for v in value})]
    return type(value).__name__


def znode(zk: KazooClient, path: str) -> dict[str, Any]:
    data, stat = zk.get(path)
    text = (data or b"").decode()
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return {"shape": shape(parsed), "ephemeral": stat.ephemeralOwner != 0, "empty": not data}


def kinds(zk: KazooClient, topic: str, broker: int) -> dict[str, dict[str, Any]]:
    paths = {
        "broker registration": f"/brokers/ids/{broker}",
        "topic assignment": f"/brokers/topics/{topic}",
        "partitions folder": f"/brokers/topics/{topic}/partitions",
        "partition folder": f"/brokers/topics/{topic}/partitions/0",
        "partition state": f"/brokers/topics/{topic}/partitions/0/state",
        "topic config": f"/config/topics/{topic}",
        "controller": "/controller",
        "controller epoch": "/controller_epoch",
        "cluster id": "/cluster/id",
        "feature": "/feature",
        "broker seqid": "/brokers/seqid",
        "delete topics folder": "/admin/delete_topics",
    }
    return {kind: znode(zk, path) for kind, path in paths.items()}


def skeleton(zk: KazooClient) -> dict[str, list[str]]:
    return {p: sorted(zk.get_children(p)) for p in ("/", "/brokers", "/config")}


def test_a_simulated_cluster_has_the_znode_formats_real_kafka_wrote(
    cluster, kafka_zk, zk_chroot, new_topic, tmp_path
):
    real_topic = new_topic(partitions=3, replication_factor=3)
    wait_until(lambda: kafka_zk.exists(f"/brokers/topics/{real_topic}/partitions/2/state"))
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    log = tmp_path / "build.log"
    build = subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "simulate", "build", "--zookeeper", connect,
         "--brokers", "3", "--topics", "1", "--partitions-per-topic", "3",
         "--replication-factor", "3", "--hold"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        waiting.wait_until(
            lambda: "holding" in log.read_text(), 60, what="the simulator to hold",
            abandon=lambda: None if build.poll() is None else f"it exited {build.returncode}",
            detail=log.read_text,
        )  # fmt: skip
        sim_topic = zk_chroot.get_children("/brokers/topics")[0]
        broker = cluster.broker_ids[0]
        real, simulated = kinds(kafka_zk, real_topic, broker), kinds(zk_chroot, sim_topic, 1)
        for kind in real:
            assert simulated[kind] == real[kind], f"{kind} differs from Kafka's"
        assert skeleton(zk_chroot) == skeleton(kafka_zk)
        assert int(zk_chroot.get("/controller_epoch")[0]) == 1
        assert zk_chroot.get("/controller_epoch")[1].version == 1  # created at 0, then elected
    finally:
        build.send_signal(signal.SIGTERM)
        assert build.wait(60) == 0, log.read_text()
    # The brokers' sessions closed with the process: their registrations went with them.
    assert zk_chroot.get_children("/brokers/ids") == []
    assert not zk_chroot.exists("/controller")
