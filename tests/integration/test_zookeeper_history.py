"""ZooKeeper's history going back under a capture that keeps its state dir: an ensemble replaced
by another (one real server after the other, on the same port) whose zxids are behind what
capture recorded. Capture says so, and every version written after the replacement is recorded
or reported skipped, whatever the new zxids say."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from zookeeper_servers import zookeeper_server

from zkcdc.ground.change_types import EventType
from zkcdc.stack.probes import free_port_block

pytestmark = pytest.mark.integration
STATE = "/kafka/brokers/topics/t/partitions/0/state"


def _state(leader_epoch: int) -> bytes:
    return json.dumps({"controller_epoch": 1, "leader": 1, "version": 1,
                       "leader_epoch": leader_epoch, "isr": [1]}).encode()  # fmt: skip


def _kafka_tree(hosts: str, versions: int, padding: int) -> None:
    client = KazooClient(hosts)
    client.start(30)
    try:
        client.create("/kafka/cluster/id", b'{"version":"1","id":"h"}', makepath=True)
        for n in range(padding):  # zxids the second history will not reach
            client.create(f"/kafka/admin/pad-{n}", b"x", makepath=True)
        client.create(STATE, _state(0), makepath=True)
        for epoch in range(1, versions):
            client.set(STATE, _state(epoch))
    finally:
        client.stop()
        client.close()


def _versions_recorded(records: list[dict[str, Any]], after_seq: int) -> int:
    """Versions of the state znode the records after `after_seq` account for: each record's
    own and the ones it reports skipped."""
    return sum(1 + r["versions_skipped"] for r in records
               if r["seq"] > after_seq and r["path"] == STATE.removeprefix("/kafka")
               and r["op"] in ("CREATE", "UPDATE"))  # fmt: skip


def test_an_ensemble_replaced_under_capture_has_every_later_version_recorded_or_counted(
    tmp_path: Path, start_capture: Any, changes_topic: Any
) -> None:
    port = free_port_block(1)
    state_dir = tmp_path / "state"
    with zookeeper_server("kafka-3.8.4", tmp_path / "zk1", port=port) as first:
        _kafka_tree(first.hosts, versions=9, padding=0)  # the same czxids as below
        daemon = start_capture(first.hosts + "/kafka", "--cluster", "h", "--session-timeout-s",
                               "4", state_dir=state_dir, publish_to=changes_topic)  # fmt: skip
        daemon.wait_logged("in sync")
        changes_topic.wait_for(lambda r: r["path"].endswith("/0/state"), "the state znode")
    with zookeeper_server("kafka-3.8.4", tmp_path / "zk2", port=port) as second:
        _kafka_tree(second.hosts, versions=6, padding=0)  # re-created, then changed 5 times
        if daemon.process.poll() is not None:  # stopped on losing ZooKeeper: its next run
            daemon = start_capture(second.hosts + "/kafka", "--cluster", "h",
                                   "--session-timeout-s", "4", state_dir=state_dir,
                                   publish_to=changes_topic)  # fmt: skip
        changed = changes_topic.wait_event(EventType.ZOOKEEPER_HISTORY_CHANGED, timeout_s=120)
        assert "behind" in changed["reason"]
        changes_topic.wait_for(
            lambda r: _versions_recorded(changes_topic.records, changed["_seq"]) >= 6,
            "all 6 versions of the re-created state znode", timeout_s=60,
        )  # fmt: skip
        assert _versions_recorded(changes_topic.records, changed["_seq"]) == 6
        assert daemon.logged("zookeeper history changed")
        daemon.stop()


def test_a_txnlog_capture_whose_data_dir_holds_an_older_history_records_every_difference(
    tmp_path: Path, start_capture: Any, changes_topic: Any
) -> None:
    import shutil

    port, work, state_dir = free_port_block(1), tmp_path / "zk", tmp_path / "state"

    def capture(server: Any) -> Any:
        return start_capture(server.hosts + "/kafka", "--cluster", "h", "--source", "txnlog",
                             "--zk-data-dir", str(server.data_dir), state_dir=state_dir,
                             publish_to=changes_topic)  # fmt: skip

    with zookeeper_server("kafka-3.8.4", work, port=port) as first:
        _kafka_tree(first.hosts, versions=9, padding=0)
        daemon = capture(first)
        changes_topic.wait_for(lambda r: r["path"].endswith("/0/state")
                               and r["after"] and r["after"]["version"] == 8, "version 8")  # fmt: skip
        assert daemon.stop() == 0
    shutil.rmtree(work / "data")  # the same data dir, another history
    with zookeeper_server("kafka-3.8.4", work, port=port) as second:
        _kafka_tree(second.hosts, versions=6, padding=0)
        daemon = capture(second)
        changed = changes_topic.wait_event(EventType.ZOOKEEPER_HISTORY_CHANGED, timeout_s=60)
        assert "behind" in changed["reason"] and "data dir" in changed["reason"]
        changes_topic.wait_for(
            lambda r: _versions_recorded(changes_topic.records, changed["_seq"]) >= 6,
            "all 6 versions of the re-created state znode", timeout_s=60,
        )  # fmt: skip
        assert _versions_recorded(changes_topic.records, changed["_seq"]) == 6
        assert daemon.stop() == 0
