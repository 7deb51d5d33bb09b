"""Capture's transactions on the real stack: records go out in transactions under the stream's
`transactional.id` (Kafka's own TransactionsCommand lists it) or one given, and
`--no-transactions` publishes idempotently as before. The zombie case (a frozen active fenced by
the new one) is `test_capture_faults.py`'s; kills at each step of a transaction are its
failpoint cases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

pytestmark = pytest.mark.integration


def _transactional_ids(cluster: Any) -> str:
    tool = "org.apache.kafka.tools.TransactionsCommand"
    return str(cluster.kafka_tool(tool, "--bootstrap-server", cluster.bootstrap_servers, "list"))


def test_capture_publishes_in_transactions_under_its_streams_id_or_idempotently_when_told(
    cluster: Any,
    zk_chroot: KazooClient,
    start_capture: Callable[..., Any],
    changes_topic: Any,
    tmp_path: Path,
) -> None:
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    zk_chroot.create("/brokers/ids", b"", makepath=True)
    default_id = f"zkcdc-capture.{changes_topic.topic}.c1"
    daemon = start_capture(connect, "--cluster", "c1", state_dir=tmp_path / "a",
                           publish_to=changes_topic)  # fmt: skip
    daemon.wait_logged("in sync")
    zk_chroot.create("/one", b"1")
    changes_topic.wait_for(lambda r: r["cluster"] == "c1" and r["path"] == "/one", "c1's record")
    assert default_id in _transactional_ids(cluster)
    assert daemon.stop() == 0, daemon.tail()

    named = f"tid-{changes_topic.topic}"
    other = start_capture(connect, "--cluster", "c2", "--transactional-id", named,
                          state_dir=tmp_path / "b", publish_to=changes_topic)  # fmt: skip
    other.wait_logged("in sync")
    plain = start_capture(connect, "--cluster", "c3", "--no-transactions",
                          state_dir=tmp_path / "c",
                          publish_to=changes_topic)  # fmt: skip
    plain.wait_logged("in sync")
    zk_chroot.set("/one", b"2")
    for name in ("c2", "c3"):
        changes_topic.wait_for(
            lambda r, n=name: r["cluster"] == n and r["path"] == "/one" and r["op"] == "UPDATE",
            f"{name}'s update",
        )
    listed = _transactional_ids(cluster)
    assert named in listed and f"zkcdc-capture.{changes_topic.topic}.c3" not in listed, listed
    assert other.stop() == 0 and plain.stop() == 0
    changes_topic.read_to_end()
    for name in ("c1", "c2", "c3"):
        seqs = [r["seq"] for r in changes_topic.records if r["cluster"] == name]
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), (name, seqs)
