"""The kazoo edge against a real ZooKeeper, in both watch modes: the tree as the reads report
it always ends equal to ZooKeeper's, and answers arrive in version order."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from zkcdc.capture.records import Znode
from zkcdc.capture.watch.messages import Message, Read, Synced
from zkcdc.capture.watch.tree_reader import TreeReader
from zkcdc.ground import waiting

pytestmark = pytest.mark.integration


class Reads:
    """Collects what a reader emits; `tree` is the state its reads describe."""

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self.tree: dict[str, Znode] = {}
        self.answers: dict[str, list[int]] = {}
        self.synced: list[int] = []

    def drain(self) -> None:
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, Synced):
                self.synced.append(item.generation)
                continue
            assert isinstance(item, Read)
            path, znode = item.path, item.znode
            if znode is None:
                self.tree.pop(path, None)
            else:
                versions = self.answers.setdefault(path, [])
                assert not versions or versions[-1] <= znode.version, "answers out of order"
                versions.append(znode.version)
                self.tree[path] = znode


def actual_tree(client: KazooClient, path: str = "/") -> dict[str, tuple[bytes, int]]:
    data, stat = client.get(path)
    tree = {path: (data, stat.version)}
    for name in client.get_children(path):
        tree.update(actual_tree(client, f"{path.rstrip('/')}/{name}"))
    return tree


def settle(reads: Reads, client: KazooClient, timeout: float = 20.0) -> None:
    def seen() -> dict[str, Any]:
        reads.drain()
        return {p: (z.data, z.version) for p, z in reads.tree.items()}

    waiting.wait_until(
        lambda: seen() == actual_tree(client), timeout, what="the reads to settle",
        interval_s=0.05, detail=lambda: f"reads describe {seen()}, ZooKeeper has {actual_tree(client)}",
    )  # fmt: skip


@pytest.fixture(params=["recursive", "one-shot"])
def reader(request, cluster, zk_chroot) -> Iterator[tuple[TreeReader, Reads, str]]:
    client = KazooClient(hosts=cluster.zookeeper_hosts + zk_chroot.chroot, timeout=10)
    client.start(timeout=15)
    reads = Reads()
    tree_reader = TreeReader(
        client,
        reads.inbox.put,
        lambda: int(time.time() * 1000),
        recursive=request.param == "recursive",
    )
    yield tree_reader, reads, request.param
    tree_reader.close()
    client.stop()
    client.close()


def test_snapshot_then_creates_changes_deletes_and_recreations_end_as_zookeeper_has_them(
    reader, zk_chroot
):
    tree_reader, reads, mode = reader
    zk_chroot.create("/a/b", b"1", makepath=True)
    generation = tree_reader.sync()
    settle(reads, zk_chroot)
    assert reads.synced == [generation]
    assert tree_reader.recursive is (mode == "recursive")  # ZooKeeper 3.8 has addWatch

    for i in range(5):
        zk_chroot.set("/a", str(i).encode())
    zk_chroot.create("/c/d/e", b"deep", makepath=True)
    zk_chroot.delete("/a/b")
    zk_chroot.create("/a/b", b"again")
    zk_chroot.delete("/c", recursive=True)
    zk_chroot.create("/c", b"back")
    settle(reads, zk_chroot)
    assert reads.tree["/a"].version == 5 and reads.tree["/a/b"].data == b"again"


def test_a_burst_of_pipelined_writes_is_read_in_order_up_to_its_last_version(reader, zk_chroot):
    tree_reader, reads, _ = reader
    zk_chroot.create("/hot", b"0")
    tree_reader.sync()
    settle(reads, zk_chroot)
    writes = [zk_chroot.set_async("/hot", str(i).encode()) for i in range(1, 501)]
    for write in writes:
        write.get(timeout=30)
    settle(reads, zk_chroot)  # drain() asserts the answers never go back in version
    assert reads.answers["/hot"][-1] == 500
    assert reads.tree["/hot"].data == b"500"
