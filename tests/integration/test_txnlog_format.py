"""ZooKeeper's own transaction log, read from the files the real server writes: every version of
every write, in zxid order, multis and session closes included; damage is found by offset."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkcdc.capture.txnlog.transactions import (
    CHECK,
    CLOSE_SESSION,
    CREATE,
    DELETE,
    MULTI,
    SET_DATA,
    LogEnd,
    Txn,
    TxnLogError,
    read_entries,
)
from zkcdc.ground import waiting


def log_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("log.*"), key=lambda f: int(f.name.split(".")[1], 16))


def transactions(directory: Path) -> list[Txn]:
    txns = []
    for file in log_files(directory):
        txns += [t for t in read_entries(file.read_bytes()) if isinstance(t, Txn)]
    return txns


def mine(txns: list[Txn], chroot: str) -> list[tuple[int, int, str, object]]:
    """(txn type, op type, path under the chroot, data or version) of this test's writes."""
    out = []
    for txn in txns:
        for op in txn.ops:
            paths = op.paths if op.type == CLOSE_SESSION else (op.path,)
            for path in paths:
                if path and path.startswith(chroot + "/"):
                    value = op.version if op.type == CHECK else op.data
                    out.append((txn.type, op.type, path[len(chroot) :], value))
    return out


def test_every_write_is_in_the_log_in_zxid_order_with_multis_and_session_closes(cluster, zk_chroot):
    directory = cluster.zookeeper_txnlog_dir()
    chroot = zk_chroot.chroot
    zk_chroot.create("/a", b"v0")
    for n in (1, 2, 3):
        zk_chroot.set("/a", f"v{n}".encode())  # three quick versions: all of them are logged
    owner = KazooClient(hosts=f"{zk_chroot.hosts[0][0]}:{zk_chroot.hosts[0][1]}{chroot}")
    owner.start(timeout=30)
    owner.create("/e", b"ephemeral", ephemeral=True)
    owner.stop()  # its session closes: ZooKeeper deletes /e in that transaction
    owner.close()
    t = zk_chroot.transaction()
    t.check("/a", 3)
    t.set_data("/a", b"v4")
    t.create("/b", b"made in a multi")
    t.delete("/b")
    t.commit()
    zk_chroot.delete("/a")

    expected = [
        (CREATE, CREATE, "/a", b"v0"),  # kazoo creates with the plain create
        (SET_DATA, SET_DATA, "/a", b"v1"),
        (SET_DATA, SET_DATA, "/a", b"v2"),
        (SET_DATA, SET_DATA, "/a", b"v3"),
        (CREATE, CREATE, "/e", b"ephemeral"),
        (CLOSE_SESSION, CLOSE_SESSION, "/e", None),
        (MULTI, CHECK, "/a", 4),  # logged as the checked version + 1
        (MULTI, SET_DATA, "/a", b"v4"),
        (MULTI, CREATE, "/b", b"made in a multi"),
        (MULTI, DELETE, "/b", None),
        (DELETE, DELETE, "/a", None),
    ]
    # The server may still be writing its last entries when we read.
    with contextlib.suppress(waiting.WaitFailed):
        waiting.wait_until(lambda: mine(transactions(directory), chroot) == expected, 30,
                           what="the server's last entries", interval_s=0.2)  # fmt: skip
    txns = transactions(directory)
    found = mine(txns, chroot)
    assert found == expected
    versions = [
        op.version for t in txns for op in t.ops if op.type == SET_DATA and op.path == chroot + "/a"
    ]
    assert versions == [1, 2, 3, 4]  # each setData logs the version it makes: none missing
    zxids = [t.zxid for t in txns]
    assert zxids == sorted(zxids) and len(set(zxids)) == len(zxids)
    created = next(t for t in txns if any(op.path == chroot + "/a" for op in t.ops))
    assert abs(created.time_ms - time.time() * 1000) < 120_000


def test_a_flipped_byte_is_damage_at_its_entry_and_a_torn_tail_is_an_entry_in_progress(
    cluster, zk_chroot
):
    zk_chroot.create("/x", b"y" * 100)
    directory = cluster.zookeeper_txnlog_dir()
    data = log_files(directory)[-1].read_bytes()
    entries = list(read_entries(data))
    end = entries[-1]
    assert isinstance(end, LogEnd) and end.complete
    txns = [e for e in entries if isinstance(e, Txn)]
    victim = txns[-1]
    flipped = bytearray(data)
    flipped[victim.offset + 20] ^= 0xFF
    with pytest.raises(TxnLogError, match=f"entry at {victim.offset}: checksum"):
        list(read_entries(bytes(flipped)))
    torn = list(read_entries(data[: victim.offset + 30]))
    assert torn[-1] == LogEnd(victim.offset, complete=False, cut=True)  # more bytes complete it
    assert [t.zxid for t in torn[:-1]] == [t.zxid for t in txns[:-1]]
    with pytest.raises(TxnLogError, match="not a ZooKeeper transaction log"):
        list(read_entries(b"XXXX" + data[4:]))
