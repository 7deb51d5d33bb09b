"""Large znodes never stop capture: a znode of 1 MB (near ZooKeeper's default jute.maxbuffer)
changed again and again reaches Kafka whole and in order on the topic capture creates; on a
topic that takes less, the records go out without their images' bytes, flagged in a header,
and the event log keeps them whole."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from capture_harness import ChangesTopic, decode
from conftest import wait_until

from zkcdc.capture.delivery.event_log import read_records

pytestmark = pytest.mark.integration

PATH = "/big/znode"


def _versions(changes: ChangesTopic) -> list[int]:
    changes.poll()
    return [r["after"]["version"] for r in changes.records if r["path"] == PATH and r["after"]]


class OmittedTopic(ChangesTopic):
    """Also keeps each record's zkcdc.omitted header."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.omitted: dict[int, dict[str, Any]] = {}

    def take(self, message: Any) -> None:
        record = decode(message.value())
        self.records.append(record)
        headers = dict(message.headers() or [])
        if "zkcdc.omitted" in headers:
            self.omitted[record["seq"]] = json.loads(headers["zkcdc.omitted"])


def _write_big(zk: Any, changes: int, size: int) -> list[bytes]:
    written = []
    for n in range(changes):
        data = os.urandom(size)
        if n == 0:
            zk.create(PATH, data, makepath=True)
        else:
            zk.set(PATH, data)
        written.append(data)
        zk.set("/small", str(n).encode()) if zk.exists("/small") else zk.create("/small", b"0")
    return written


def _logged_images(event_log: Path) -> list[bytes]:
    return [r["after"]["data"] for r in read_records(event_log) if r["path"] == PATH and r["after"]]


def test_a_1_mb_znode_changed_repeatedly_reaches_kafka_whole_and_in_order(
    cluster: Any, zk_chroot: Any, start_capture: Any, changes_topic: ChangesTopic, tmp_path: Path
) -> None:
    event_log = tmp_path / "events"
    daemon = start_capture(cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1",
                           "--event-log", str(event_log), publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")
    written = _write_big(zk_chroot, 6, 1_000_000)
    # Watch mode reads a znode after its watch fires, so under load a version overwritten before
    # the read is reported skipped rather than recorded; the last one always arrives.
    wait_until(lambda: 5 in _versions(changes_topic), 180, what="the last 1 MB change on Kafka")
    records = [r for r in changes_topic.records if r["path"] == PATH and r["after"]]
    versions = [r["after"]["version"] for r in records]
    assert versions == sorted(set(versions)), versions
    assert [r["after"]["data"] for r in records] == [written[v] for v in versions]
    assert [r["before"]["data"] for r in records[1:]] == [written[v] for v in versions[:-1]]
    assert daemon.stop() == 0, daemon.tail()
    logged = [r for r in read_records(event_log) if r["path"] == PATH and r["after"]]
    assert [(r["after"]["version"], r["after"]["data"]) for r in logged] == [
        (v, written[v]) for v in versions
    ]


def test_records_over_what_the_topic_takes_go_out_flagged_and_the_log_keeps_them_whole(
    cluster: Any, zk_chroot: Any, start_capture: Any, new_topic: Any, tmp_path: Path
) -> None:
    topic = new_topic(partitions=3, **{"max.message.bytes": "200000"})  # made elsewhere, small
    changes = OmittedTopic(cluster.bootstrap_servers, topic)
    event_log = tmp_path / "events"
    daemon = start_capture(cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1",
                           "--event-log", str(event_log), publish_to=changes)  # fmt: skip
    try:
        daemon.wait_logged("in sync")
        written = _write_big(zk_chroot, 5, 300_000)
        wait_until(lambda: 4 in _versions(changes), 90, what="the last large change on Kafka")

        # Capture went on: the small znode's changes after the large ones got there too.
        def last_small_change() -> bool:
            changes.poll()
            return any(
                r["path"] == "/small" and r["after"]["data"] == b"4" for r in changes.records
            )

        wait_until(last_small_change, 60, what="the last small change")
        records = [r for r in changes.records if r["path"] == PATH]
        versions = [r["after"]["version"] for r in records]
        assert versions == sorted(set(versions)), versions  # a skipped version is allowed (watch)
        for record, data in zip(records, [written[v] for v in versions], strict=True):
            assert record["after"]["data"] is None
            flag = changes.omitted[record["seq"]]
            assert flag["after"] == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        warned = "the changes topic takes smaller records than a znode may need"
        assert any(str(line.get("event")).startswith(warned) for line in daemon.log_lines())
        assert daemon.stop() == 0, daemon.tail()
        assert _logged_images(event_log) == [written[v] for v in versions]
    finally:
        changes.close()
