"""The pure core of the transaction-log capture mode: ZooKeeper's transactions applied to the
known tree of Kafka's chroot, each change a record with its exact zxid, ZooKeeper's time and
`before` image, and no version ever skipped.

The start is a snapshot (READ records the first time; after a gap in the logs, what differs,
with the versions that could not be seen counted as `versions_skipped`, as the watch mode
does). Snapshots are fuzzy, so a transaction whose effect the tree already holds (a znode
modified at or after its zxid, a delete of a znode that is not there) changes nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from zkcdc.capture.records import ChangeRecord, Source, Znode
from zkcdc.capture.secret_redaction import DEFAULT_REDACTOR, Redact
from zkcdc.capture.tracker import Tracker, TrackerState, change_record
from zkcdc.capture.txnlog.snapshot import Snapshot
from zkcdc.capture.txnlog.transactions import (
    CLOSE_SESSION,
    CREATE,
    CREATE2,
    CREATE_CONTAINER,
    CREATE_TTL,
    DELETE,
    DELETE_CONTAINER,
    SET_DATA,
    Txn,
)
from zkcdc.ground.change_types import Op

MODE = "txnlog"


def chroot_filter(chroot: str, excluded: Callable[[str], bool]) -> Callable[[str], str | None]:
    """ZooKeeper's absolute path -> the path under the chroot ("/" for the chroot itself), or
    None for paths outside it or excluded."""
    prefix = chroot.rstrip("/")

    def local(path: str) -> str | None:
        if not prefix:
            inner = path
        elif path == prefix:
            inner = "/"
        elif path.startswith(prefix) and path[len(prefix)] == "/":
            inner = path[len(prefix) :]
        else:
            return None
        return None if excluded(inner) else inner

    return local


def _owner(op_type: int, ephemeral: bool, session: int) -> int:
    """The ephemeral owner as clients (and so the watch mode) see it: containers and TTL znodes
    have none (ZooKeeper keeps a marker there, which it never shows)."""
    return session if ephemeral and op_type in (CREATE, CREATE2) else 0


class TxnTracker:
    def __init__(
        self,
        state: TrackerState,
        now_ms: Callable[[], int],
        chroot: str = "",
        excluded: Callable[[str], bool] = lambda p: False,
        redact: Redact = DEFAULT_REDACTOR.data,
    ) -> None:
        self.state = state
        self._now_ms = now_ms
        self._local = chroot_filter(chroot, excluded)
        self._redact = redact
        # Snapshot loads and heartbeats; it redacts the snapshot's znodes.
        self._watch_like = Tracker(state, now_ms, mode=MODE, redact=redact)
        self._touched: set[str] = set()  # paths the current transaction changed so far

    def load_snapshot(self, snapshot: Snapshot) -> list[ChangeRecord]:
        """The tree as of the snapshot: every znode as READ the first time, otherwise the
        difference to what is known. Ends with a heartbeat that carries the snapshot's zxid,
        so a restart knows where the log takes over."""
        tracker = self._watch_like
        tracker.begin_sync()
        records: list[ChangeRecord] = []
        for path, znode in snapshot.nodes.items():
            local = self._local(path)
            if local is not None:
                records += tracker.read(local, znode)
        records += tracker.end_sync()
        self.state.zxid = snapshot.zxid
        # Its time is the snapshot's (its newest change), not now: a copy read long after must
        # not move the alert rules' event time past the transactions that follow.
        newest = max((z.mtime_ms for z in snapshot.nodes.values()), default=0)
        records.append(self.heartbeat(newest))
        return records

    def history_changed(self, reason: str) -> ChangeRecord:
        """The data dir holds another history: the next snapshot load records every
        difference from the known tree, whatever its zxids say (`Tracker.history_changed`)."""
        return self._watch_like.history_changed(reason)

    def heartbeat(self, ts_ms: int | None = None) -> ChangeRecord:
        """ZooKeeper's time has reached `ts_ms` (default now) with nothing else to record."""
        record = self._watch_like.heartbeat()
        return record if ts_ms is None else dataclasses.replace(record, ts_ms=ts_ms)

    def apply(self, txn: Txn) -> list[ChangeRecord]:
        """The records of one committed transaction (several for a multi or a session close)."""
        if txn.zxid <= self.state.zxid:
            return []
        self.state.zxid = txn.zxid
        records: list[ChangeRecord] = []
        local = self._local
        self._touched.clear()
        for op in txn.ops:
            kind = op.type
            if kind == CLOSE_SESSION:
                # ZooKeeper before 3.6 did not log the ephemerals a session close deletes.
                paths = [local(p) for p in op.paths] if op.paths else self._owned_by(txn)
                for path in paths:
                    self._delete(txn, path, records)
                continue
            path = None if op.path is None else local(op.path)
            if path is None:
                continue
            if kind == SET_DATA:
                self._set(txn, path, op.data, op.version or 0, records)
            elif kind in (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL):
                owner = _owner(kind, op.ephemeral, txn.session_id)
                self._create(txn, path, op.data, owner, records)
            elif kind in (DELETE, DELETE_CONTAINER):
                self._delete(txn, path, records)
            # check, error, setACL, createSession, reconfig: nothing of Kafka's data changes
        return records

    def _applied(self, mzxid: int, zxid: int, path: str) -> bool:
        """The tree already holds this transaction's change of `path`: a snapshot taken after
        it. A multi's earlier operation on the same path (same zxid) does not count."""
        return mzxid > zxid or (mzxid == zxid and path not in self._touched)

    def _owned_by(self, txn: Txn) -> list[str | None]:
        return [p for p, z in self.state.tree.items() if z.ephemeral_owner == txn.session_id]

    def _create(
        self, txn: Txn, path: str, data: bytes | None, owner: int, out: list[ChangeRecord]
    ) -> None:
        known = self.state.tree.get(path)
        if known is not None and self._applied(known.mzxid, txn.zxid, path):
            return  # the snapshot already holds it
        if known is not None:
            out.append(self._record(Op.DELETE, path, known, None, txn))
        data = self._redact(path, data)
        after = Znode(data, 0, txn.zxid, txn.zxid, txn.time_ms, txn.time_ms, owner)
        self.state.tree[path] = after
        self._touched.add(path)
        out.append(self._record(Op.CREATE, path, None, after, txn))

    def _set(
        self, txn: Txn, path: str, data: bytes | None, version: int, out: list[ChangeRecord]
    ) -> None:
        known = self.state.tree.get(path)
        if known is None or self._applied(known.mzxid, txn.zxid, path):
            return  # deleted later in a fuzzy snapshot, or already applied
        after = Znode(
            self._redact(path, data),
            version,
            known.czxid,
            txn.zxid,
            known.ctime_ms,
            txn.time_ms,
            known.ephemeral_owner,
        )
        self.state.tree[path] = after
        self._touched.add(path)
        skipped = max(version - known.version - 1, 0)  # only after damage in the logs
        out.append(self._record(Op.UPDATE, path, known, after, txn, skipped))

    def _delete(self, txn: Txn, path: str | None, out: list[ChangeRecord]) -> None:
        known = None if path is None else self.state.tree.get(path)
        if path is None or known is None or known.czxid > txn.zxid:
            return  # not there, or created again after this delete (fuzzy snapshot)
        del self.state.tree[path]
        out.append(self._record(Op.DELETE, path, known, None, txn))

    def _record(
        self,
        op: Op,
        path: str,
        before: Znode | None,
        after: Znode | None,
        txn: Txn,
        skipped: int = 0,
    ) -> ChangeRecord:
        return change_record(
            self.state,
            op,
            path,
            before,
            after,
            zxid=txn.zxid,
            ts_ms=txn.time_ms,
            captured_ms=self._now_ms(),
            skipped=skipped,
            source=Source(MODE, txn.session_id, False),
        )
