"""The pure core of capture: the last known tree, and reads of ZooKeeper turned into records.

Every read of a znode (or its absence) is compared with what was last recorded for that path:
a new czxid is a delete and a create, a newer mzxid an update whose version gap is
`versions_skipped`, an older or equal one nothing. During a re-sync every path read is noted,
and the known paths that were not read are the deletes that happened while zkcdc was blind."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from zkcdc.capture import failpoints
from zkcdc.capture.decoders import router
from zkcdc.capture.records import ChangeRecord, ClusterEvent, Source, Znode
from zkcdc.capture.secret_redaction import DEFAULT_REDACTOR, Redact
from zkcdc.ground.change_types import EventType, Op


@dataclass
class TrackerState:
    """What must survive a restart: the known tree and the last seq given out."""

    cluster: str
    seq: int = 0
    tree: dict[str, Znode] = field(default_factory=dict)
    zxid: int = 0  # txnlog mode: the last transaction read (the tree is as of it)
    # The source that gave the last record (watch, txnlog, kraft; "" before any): a KRaft
    # capture that finds another source's tree takes the stream over (a migrated cluster).
    mode: str = ""


class Tracker:
    def __init__(
        self,
        state: TrackerState,
        now_ms: Callable[[], int],
        mode: str = "watch",
        redact: Redact = DEFAULT_REDACTOR.data,
    ) -> None:
        self.state = state
        self._redact = redact
        self._now_ms = now_ms
        self.mode = mode
        self.session_id: int | None = None
        self._snapshot = not state.tree  # nothing known yet: the first sync is a snapshot
        self._seen: set[str] | None = None
        self._observed_ms: int | None = None
        # Znodes ZooKeeper would not let capture read (path -> what: data, children), each
        # recorded once until it is readable again or gone.
        self.unreadable: dict[str, set[str]] = {}
        # ZooKeeper's history is not the one the known tree came from (`history_changed`):
        # until the walk ends, zxids do not order a read against what is known.
        self._other_history = False

    @property
    def in_snapshot(self) -> bool:
        return self._snapshot and self._seen is not None

    def begin_sync(self) -> None:
        """A traversal of the whole tree starts (start-up, reconnect, session expiry)."""
        self._seen = set()

    def end_sync(self) -> list[ChangeRecord]:
        """The traversal is complete: known paths it did not find were deleted meanwhile."""
        seen, self._seen = self._seen or set(), None
        self._observed_ms = None
        self._snapshot = False
        self._other_history = False
        gone = [p for p in self.state.tree if p not in seen]
        gone += [p for p in self.unreadable if p not in seen and p not in self.state.tree]
        # Children before their parents, as ZooKeeper must have deleted them.
        gone.sort(key=lambda p: (-p.count("/"), p))
        for p in gone:
            self.unreadable.pop(p, None)
        return [self._record(Op.DELETE, p, self.state.tree.pop(p, None), None) for p in gone]

    def unreadable_znode(
        self, path: str, what: str, reason: str, observed_ms: int | None = None
    ) -> list[ChangeRecord]:
        """ZooKeeper refused to read `path`'s data or list its children (`what`): a record of
        the znode with no image and a ZNODE_UNREADABLE event saying why, once until it is
        readable again or gone. A known image of it is dropped: it can no longer be followed."""
        self._observed_ms = observed_ms
        if self._seen is not None:
            self._seen.add(path)
        refused = self.unreadable.get(path)
        if refused is not None:  # recorded already (its data or its children)
            refused.add(what)
            return []
        self.unreadable[path] = {what}
        known = self.state.tree.pop(path, None)
        op = Op.READ if self.in_snapshot else (Op.UPDATE if known is not None else Op.CREATE)
        event = ClusterEvent(type=EventType.ZNODE_UNREADABLE, reason=f"{what}: {reason}")
        return [self._record(op, path, known, None, snapshot=self.in_snapshot, events=(event,))]

    def read(
        self,
        path: str,
        znode: Znode | None,
        observed_ms: int | None = None,
        announced_created: bool = False,
    ) -> list[ChangeRecord]:
        """A read of `path` returned `znode` (None: no such znode) at `observed_ms`;
        `announced_created`: the read followed ZooKeeper's notice that `path` was created."""
        self._observed_ms = observed_ms
        if znode is not None and znode.data:
            kept = self._redact(path, znode.data)
            znode = znode if kept is znode.data else dataclasses.replace(znode, data=kept)
        known = self.state.tree.get(path)
        if znode is not None and self._seen is not None:
            self._seen.add(path)
        refused = self.unreadable.pop(path, None) if self.unreadable else None
        if znode is None:
            if known is None and refused:
                return [self._record(Op.DELETE, path, None, None)]  # gone, never read
            if known is None:
                # Created and deleted again before it could be read: a DELETE with neither
                # image, its unseen version counted as skipped (a gap, never silence).
                if announced_created and not self.in_snapshot:
                    return [self._record(Op.DELETE, path, None, None, skipped=1)]
                return []
            del self.state.tree[path]
            return [self._record(Op.DELETE, path, known, None)]
        walking = self._seen is not None  # a walk starts with a sync: reads are not stale
        if known is not None and walking and not self._other_history and _behind(known, znode):
            reason = (
                f"{path} read at mzxid {znode.mzxid:#x}, behind the {known.mzxid:#x} recorded for "
                f"the same czxid: ZooKeeper's history is not the one capture saved (an ensemble "
                f"rebuilt or restored from a backup); every difference from the saved tree is "
                f"recorded"
            )
            return [self.history_changed(reason), *self.read(path, znode, observed_ms)]
        if known is not None and self._other_history:
            if _same_znode(known, znode):
                return []  # the same in both histories
            # Another history's znode: a re-creation, every version of it counted.
            self.state.tree[path] = znode
            return [self._record(Op.DELETE, path, known, None),
                    self._record(Op.CREATE, path, None, znode, znode.version)]  # fmt: skip
        if known is not None and known.czxid == znode.czxid:
            if znode.mzxid <= known.mzxid:
                return []  # an older or repeated read of what is already recorded
            self.state.tree[path] = znode
            skipped = max(znode.version - known.version - 1, 0)
            return [self._record(Op.UPDATE, path, known, znode, skipped)]
        records = []
        if known is not None:
            # Deleted and created again between two reads.
            records.append(self._record(Op.DELETE, path, known, None))
        self.state.tree[path] = znode
        if self.in_snapshot:
            records.append(self._record(Op.READ, path, None, znode, snapshot=True))
        else:
            records.append(self._record(Op.CREATE, path, None, znode, znode.version))
        return records

    def history_changed(self, reason: str) -> ChangeRecord:
        """ZooKeeper's history is not the one the known tree came from (an ensemble rebuilt or
        restored from a backup: its zxids are behind what was recorded). Until the walk under
        way ends, every znode that differs from the known tree in anything is recorded as
        re-created, whatever its zxids say. Returns the record that says so."""
        self._other_history = True
        now = self._now_ms()
        self.state.seq += 1
        self.state.mode = self.mode
        event = ClusterEvent(type=EventType.ZOOKEEPER_HISTORY_CHANGED, reason=reason)
        return ChangeRecord(
            cluster=self.state.cluster, seq=self.state.seq, op=Op.HEARTBEAT, path="",
            before=None, after=None, zxid=None, ts_ms=now, captured_ms=now,
            source=Source(self.mode, self.session_id, False), events=(event,),
        )  # fmt: skip

    def known_position(self) -> int:
        """The newest zxid the known tree holds (0 if none)."""
        return max((max(z.mzxid, z.czxid) for z in self.state.tree.values()), default=0)

    def heartbeat(self) -> ChangeRecord:
        now = self._now_ms()
        self.state.seq += 1
        self.state.mode = self.mode
        return ChangeRecord(
            cluster=self.state.cluster,
            seq=self.state.seq,
            op=Op.HEARTBEAT,
            path="",
            before=None,
            after=None,
            zxid=self.state.zxid or None,
            ts_ms=now,
            captured_ms=now,
            source=Source(self.mode, self.session_id, False),
        )

    def _record(
        self,
        op: Op,
        path: str,
        before: Znode | None,
        after: Znode | None,
        skipped: int = 0,
        snapshot: bool = False,
        events: tuple[ClusterEvent, ...] | None = None,
    ) -> ChangeRecord:
        now = self._observed_ms if self._observed_ms is not None else self._now_ms()
        return change_record(
            self.state,
            op,
            path,
            before,
            after,
            zxid=after.mzxid if after is not None else None,
            ts_ms=after.mtime_ms if after is not None else now,
            captured_ms=now,
            skipped=skipped,
            source=Source(self.mode, self.session_id, snapshot),
            events=events,
        )


def change_record(
    state: TrackerState,
    op: Op,
    path: str,
    before: Znode | None,
    after: Znode | None,
    *,
    zxid: int | None,
    ts_ms: int,
    captured_ms: int,
    skipped: int,
    source: Source,
    events: tuple[ClusterEvent, ...] | None = None,
) -> ChangeRecord:
    """The next record of `state`'s cluster (its seq), with the typed events of the change."""
    state.seq += 1
    state.mode = source.mode
    failpoints.hit("tracker.record")
    return ChangeRecord(
        cluster=state.cluster,
        seq=state.seq,
        op=op,
        path=path,
        before=before,
        after=after,
        zxid=zxid,
        ts_ms=ts_ms,
        captured_ms=captured_ms,
        versions_skipped=skipped,
        source=source,
        events=events if events is not None else tuple(router.decode(path, before, after)),
    )


def _behind(known: Znode, read: Znode) -> bool:
    """A read of the same znode (czxid) older than what was recorded, or another version at the
    same mzxid: impossible in one history once the server has caught up (a walk starts with a
    sync)."""
    if known.czxid != read.czxid:
        return False
    return read.mzxid < known.mzxid or (read.mzxid == known.mzxid and read.version != known.version)


def _same_znode(a: Znode, b: Znode) -> bool:
    return (a.czxid, a.mzxid, a.version, a.ctime_ms, a.mtime_ms, a.data) == (
        b.czxid,
        b.mzxid,
        b.version,
        b.ctime_ms,
        b.mtime_ms,
        b.data,
    )


def znode_from_avro(value: dict[str, Any] | None) -> Znode | None:
    return None if value is None else Znode(**value)


def apply_records(state: TrackerState, records: Iterable[dict[str, Any]]) -> int:
    """Brings a state up to date with records already given out (from the event log or the
    topic), e.g. after a restart. Returns how many were applied."""
    applied = 0
    for record in records:
        if record["cluster"] != state.cluster or record["seq"] <= state.seq:
            continue
        state.seq = record["seq"]
        applied += 1
        source = record["source"]
        state.mode = source["mode"]
        if source["mode"] in ("txnlog", "kraft") and not source["snapshot"] and record["zxid"]:
            state.zxid = max(state.zxid, record["zxid"])
        op = record["op"]
        if op == "HEARTBEAT":
            continue
        after = znode_from_avro(record["after"])
        if after is None:
            state.tree.pop(record["path"], None)
        else:
            state.tree[record["path"]] = after
    return applied
