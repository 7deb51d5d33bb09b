"""Change records from a ZooKeeper data dir: the whole retained history of a copy taken after an
incident (`--from-txnlog`), and the cluster's name found in it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from zkcdc.capture.delivery.event_log import EventLogWriter
from zkcdc.capture.encoding.record_encoding import encode_records
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.tracker import TrackerState
from zkcdc.capture.txnlog.data_dir import LogDamage, read_history, start_snapshot, version_dir
from zkcdc.capture.txnlog.transactions import CREATE, CREATE2, SET_DATA, TxnLogError
from zkcdc.capture.txnlog.txn_tracker import TxnTracker


def _id_of(data: bytes | None) -> str | None:
    try:
        value = json.loads(data or b"")["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(value)


def cluster_id_in(directory: Path, chroot: str) -> str:
    """Kafka's cluster id (`<chroot>/cluster/id`) as the newest snapshot holds it, or as the
    logs after that snapshot wrote it. Raises TxnLogError when Kafka's tree is not there."""
    path = chroot.rstrip("/") + "/cluster/id"
    snapshot = start_snapshot(directory, lambda problem: None)
    znode = snapshot.nodes.get(path)
    found = None if znode is None else _id_of(znode.data)
    if found is None:
        for txn in read_history(directory, snapshot.zxid, lambda damage: None):
            for op in txn.ops:
                if op.path == path and op.type in (CREATE, CREATE2, SET_DATA):
                    found = _id_of(op.data) or found
    if found is None:
        raise TxnLogError(
            f"no Kafka cluster id at {path} in {directory}: is the chroot right "
            "(--chroot)? Or name the cluster (--cluster NAME)"
        )
    return found


def history(
    data_dir: Path,
    chroot: str,
    cluster: str | None,
    on_problem: Callable[[str], None],
    on_damage: Callable[[LogDamage], None],
    excluded: Callable[[str], bool] = lambda p: False,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    heartbeat_ms: int = 1_000,
) -> Iterator[ChangeRecord]:
    """Every change the data dir's files still hold for Kafka's chroot: the oldest snapshot the
    logs continue from (READ records), then every logged transaction after it. Where ZooKeeper's
    clock moved on by `heartbeat_ms` without a change in the chroot (other transactions show
    it), a heartbeat at that time keeps the alert rules' timers going, as live heartbeats do."""
    directory = version_dir(data_dir)
    name = cluster or cluster_id_in(directory, chroot)
    snapshot = start_snapshot(directory, on_problem, oldest=True)
    tracker = TxnTracker(TrackerState(cluster=name), now_ms, chroot, excluded)
    records = tracker.load_snapshot(snapshot)
    last_ms = records[-1].ts_ms
    yield from records
    for txn in read_history(directory, snapshot.zxid, on_damage):
        changed = tracker.apply(txn)
        if changed:
            last_ms = txn.time_ms
            yield from changed
        elif txn.time_ms - last_ms >= heartbeat_ms:
            last_ms = txn.time_ms
            yield tracker.heartbeat(txn.time_ms)


def write_event_log(records: Iterator[ChangeRecord], folder: Path, batch: int = 5_000) -> int:
    """Writes records as an event log (what replay and the alert job read); returns how many."""
    written = 0
    writer: EventLogWriter | None = None
    chunk: list[ChangeRecord] = []

    def flush() -> None:
        nonlocal writer
        if writer is None:
            writer = EventLogWriter(folder, chunk[0].cluster, now=time.time)
        writer.append(*encode_records(writer.encode, chunk))
        chunk.clear()

    try:
        for record in records:
            chunk.append(record)
            written += 1
            if len(chunk) >= batch:
                flush()
        if chunk:
            flush()
    finally:
        if writer is not None:
            writer.close()
    return written
