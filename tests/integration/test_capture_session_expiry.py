"""A ZooKeeper session expiry (the real one: the session closed from another client) makes the
daemon re-arm its watches and record exactly what changed while it was blind."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import wait_until
from kazoo.client import KazooClient

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.capture.runner import CaptureRunner
from zkcdc.capture.settings import load_settings
from zkcdc.capture.watch.source import WatchSource

pytestmark = pytest.mark.integration


def _expire(hosts: str, client: KazooClient) -> None:
    """kazoo's own test technique: a second client on the same session closes it."""
    twin = KazooClient(hosts=hosts, client_id=client.client_id)
    twin.start(timeout=10)
    twin.stop()
    twin.close()


@pytest.mark.parametrize("watch_mode", ["recursive", "one-shot"])
def test_after_a_session_expiry_only_the_differences_are_recorded(
    cluster, zk_chroot, tmp_path, watch_mode
):
    for name in ("a", "b", "c"):
        zk_chroot.create(f"/{name}", b"0")
    settings = load_settings(
        None,
        zookeeper=cluster.zookeeper_hosts + zk_chroot.chroot,
        cluster="expiry",
        state_dir=tmp_path,
        ha_path=f"/zkcdc-tests/ha-expiry-{time.monotonic_ns()}",
        heartbeat_s=60.0,
        watch_mode=watch_mode,
    )
    daemon = CaptureRunner(settings)
    assert isinstance(daemon.source, WatchSource)
    source = daemon.source
    runner = threading.Thread(target=daemon.run)
    runner.start()
    log = tmp_path / "expiry" / "events"

    def records():
        return list(read_records(log, lambda damage: None)) if log.exists() else []

    try:
        wait_until(lambda: any(r["path"] == "/c" for r in records()), what="the snapshot")
        assert source.client is not None
        session = source.client.client_id[0]
        before = len(records())

        _expire(cluster.zookeeper_hosts, source.client)
        zk_chroot.set("/a", b"1")
        zk_chroot.delete("/b")
        zk_chroot.create("/d", b"0")
        wait_until(
            lambda: (
                {(r["op"], r["path"]) for r in records()[before:]}
                >= {("UPDATE", "/a"), ("DELETE", "/b"), ("CREATE", "/d")}
            ),
            what="the changes made around the expiry",
        )
        wait_until(lambda: source.client.client_id[0] != session, what="a new session")
        zk_chroot.set("/c", b"1")  # watched again after the re-sync
        wait_until(lambda: any(r["path"] == "/c" and r["op"] == "UPDATE" for r in records()))
    finally:
        daemon.stop()
        runner.join(30)
    after = [(r["op"], r["path"]) for r in records()[before:] if r["op"] != "HEARTBEAT"]
    assert sorted(after) == sorted(
        [("UPDATE", "/a"), ("DELETE", "/b"), ("CREATE", "/d"), ("UPDATE", "/c")]
    ), "a record for an unchanged znode, or a change twice"
    assert not runner.is_alive()
