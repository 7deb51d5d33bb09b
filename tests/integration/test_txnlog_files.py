"""The snapshot and log readers on files real ZooKeeper servers write: Kafka's bundled 3.8.4 and
Debian's 3.8.0, each a standalone server of the test's own that snapshots and rolls its log over
every few hundred transactions and grows its files past their preallocation."""

from __future__ import annotations

import threading
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create2, long_struct
from kazoo.security import OPEN_ACL_UNSAFE
from zookeeper_servers import zookeeper_ensemble, zookeeper_server

from zkcdc.capture.records import Znode
from zkcdc.capture.tracker import TrackerState
from zkcdc.capture.txnlog.data_dir import (
    LogDamage,
    LogReader,
    log_files,
    read_history,
    snapshot_files,
    start_snapshot,
)
from zkcdc.capture.txnlog.txn_tracker import TxnTracker
from zkcdc.ground import waiting
from zkcdc.stack.probes import zookeeper_mode

pytestmark = pytest.mark.integration


class CreateContainer(Create2):  # kazoo has no call for these two create variants
    type = 19


class CreateTTL(namedtuple("CreateTTL", "path data acl flags ttl")):
    type = 21

    def serialize(self) -> bytes:
        body = Create2(self.path, self.data, self.acl, self.flags).serialize()
        return bytes(body) + long_struct.pack(self.ttl)

    deserialize = Create2.deserialize


def call(client: KazooClient, request: object) -> object:
    result = client.handler.async_result()
    client._call(request, result)
    return result.get(30)


KINDS = ["kafka-3.8.4", "debian-3.8.0"]


def walk(client: KazooClient, path: str = "/") -> dict[str, Znode]:
    data, stat = client.get(path)
    out = {
        path: Znode(
            data, stat.version, stat.czxid, stat.mzxid, stat.ctime, stat.mtime, stat.ephemeralOwner
        )
    }
    for child in client.get_children(path):
        out.update(walk(client, path.rstrip("/") + "/" + child))
    return out


def rebuilt(directory: Path, oldest: bool) -> dict[str, Znode]:
    damaged: list[LogDamage] = []
    snapshot = start_snapshot(directory, lambda p: pytest.fail(p), oldest=oldest)
    tracker = TxnTracker(TrackerState("c"), lambda: 0)
    tracker.load_snapshot(snapshot)
    for txn in read_history(directory, snapshot.zxid, damaged.append):
        tracker.apply(txn)
    assert damaged == []
    return tracker.state.tree


@pytest.mark.parametrize("kind", KINDS)
def test_a_snapshot_and_the_logs_after_it_rebuild_the_servers_tree_exactly(kind, tmp_path):
    # ZooKeeper snapshots after snapCount/2 plus a random share of snapCount/2 transactions:
    # at 100, the ~390 below roll the log at least three times, whatever the dice.
    with zookeeper_server(kind, tmp_path, snap_count=100) as server:
        client = KazooClient(server.hosts)
        client.start(30)
        client.create("/k/brokers/topics", b"", makepath=True)
        for n in range(150):
            client.create(f"/k/brokers/topics/t{n}", b'{"version":3}', include_data=n % 2 == 0)
        for version in range(1, 4):
            for n in range(0, 150, 3):
                client.set(f"/k/brokers/topics/t{n}", f'{{"v":{version}}}'.encode())
        owner = KazooClient(server.hosts)
        owner.start(30)
        owner.create("/k/brokers/ids/1", b'{"version":5}', ephemeral=True, makepath=True)
        owner.create("/k/brokers/ids/2", b'{"version":5}', ephemeral=True)
        owner.stop()  # the close deletes both
        t = client.transaction()
        t.check("/k/brokers/topics/t0", 3)
        t.set_data("/k/brokers/topics/t0", b"multi")
        t.create("/k/brokers/topics/m", b"")
        t.delete("/k/brokers/topics/t1")
        t.commit()
        for n in range(100, 150):
            client.delete(f"/k/brokers/topics/t{n}")
        client.create("/k/last", b"ephemeral of a live session", ephemeral=True)
        # Containers and TTL znodes; ZooKeeper itself deletes an emptied container and an
        # expired TTL znode (deleteContainer transactions).
        call(client, CreateContainer("/k/box", b"kept", OPEN_ACL_UNSAFE, 4))
        call(client, CreateContainer("/k/gone", b"emptied", OPEN_ACL_UNSAFE, 4))
        call(client, CreateTTL("/k/ttl-kept", b"t", OPEN_ACL_UNSAFE, 5, 3_600_000))
        call(client, CreateTTL("/k/ttl-gone", b"t", OPEN_ACL_UNSAFE, 5, 100))
        client.create("/k/box/item", b"")
        client.create("/k/gone/item", b"")
        client.delete("/k/gone/item")
        waiting.wait_until(
            lambda: not (client.exists("/k/gone") or client.exists("/k/ttl-gone")), 30,
            what="ZooKeeper to remove the container and the TTL znode",
        )  # fmt: skip
        expected = walk(client)
        assert {"/k/box", "/k/ttl-kept"} <= set(expected)
        directory = server.txnlog_dir
        assert len(snapshot_files(directory)) >= 3 and len(log_files(directory)) >= 3
        assert rebuilt(directory, oldest=False) == expected
        assert rebuilt(directory, oldest=True) == expected
        client.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_following_a_live_log_through_roll_overs_and_purges_misses_and_repeats_nothing(
    kind, tmp_path
):
    with zookeeper_server(kind, tmp_path, snap_count=300, prealloc_kb=8) as server:
        writes = 1_500
        done = threading.Event()
        failed: list[BaseException] = []
        purged: set[Path] = set()

        def write() -> None:
            try:
                write_all()
            except BaseException as exc:
                failed.append(exc)
            done.set()

        def write_all() -> None:
            client = KazooClient(server.hosts)
            client.start(30)
            client.create("/k/p", b"0", makepath=True)
            for n in range(1, writes + 1):
                client.set("/k/p", str(n).encode())
                if n == writes * 3 // 4:
                    before = set(log_files(server.txnlog_dir))
                    server.purge(keep=3)  # old files go while they are being followed
                    purged.update(before - set(log_files(server.txnlog_dir)))
            client.stop()

        reader = LogReader(
            server.txnlog_dir, 0, lambda d: pytest.fail(d.describe()), list_every_s=0.01
        )
        writer = threading.Thread(target=write)
        writer.start()
        zxids: list[int] = []
        versions: list[int] = []

        def followed() -> bool:
            if done.is_set() and writer.join(0) is None and versions[-1:] == [writes]:
                return True
            for txn in reader.poll():
                zxids.append(txn.zxid)
                versions.extend(
                    op.version or 0 for op in txn.ops if op.path == "/k/p" and op.type == 5
                )
            return False

        waiting.wait_until(followed, 120, what=f"the reader to follow to version {writes}",
                           interval_s=0.002, detail=server.tail)  # fmt: skip
        reader.close()
        assert zxids == list(range(1, zxids[-1] + 1)), "a transaction was missed or read twice"
        assert versions == list(range(1, writes + 1))
        assert server.txnlog_dir / "log.1" in purged


@pytest.mark.parametrize("kind", KINDS)
def test_a_follower_and_an_observer_log_every_committed_transaction_as_the_leader_does(
    kind, tmp_path
):
    with zookeeper_ensemble(kind, tmp_path) as servers:
        client = KazooClient(",".join(s.hosts for s in servers))
        client.start(30)
        client.create("/k/p", b"0", makepath=True)
        for n in range(1, 201):
            client.set("/k/p", str(n).encode())
        t = client.transaction()
        t.create("/k/q", b"")
        t.set_data("/k/p", b"multi")
        t.commit()
        last = client.exists("/k/p").mzxid
        modes = {zookeeper_mode("127.0.0.1", s.port): s for s in servers}
        assert set(modes) == {"leader", "follower", "observer"}, modes
        seen = {}
        for mode, server in modes.items():

            def logged(server: Any = server) -> list[Any] | None:
                txns = list(read_history(server.txnlog_dir, 0, lambda d: pytest.fail(d.describe())))
                return txns if txns and txns[-1].zxid >= last else None

            # A follower or observer may log a moment after the client's answer.
            txns = waiting.wait_until(logged, 30, what=f"{mode} to log zxid {last}")
            seen[mode] = [(t.zxid, t.type, t.ops) for t in txns if t.zxid <= last]
        client.stop()
    assert seen["follower"] == seen["leader"] == seen["observer"]
    versions = [
        op.version
        for _, _, ops in seen["leader"]
        for op in ops
        if op.path == "/k/p" and op.type == 5
    ]
    assert versions == list(range(1, 202))
