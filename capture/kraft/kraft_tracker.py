"""The pure core of the KRaft capture: committed metadata records applied to the image, the
znodes they change (`zk_tree`) compared with the known tree, each difference a change record
with the record's offset where ZooKeeper's zxid goes and the controller's time.

A znode's `czxid`/`mzxid` are the offsets of the records that created and last changed it, its
`version` counts its changes. The tree kept (and checkpointed) is the rendered one; the image
behind it is rebuilt on a restart by reading the log again up to the position (`state.zxid`,
the last offset given out), which gives no records."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from zkcdc.capture.kraft.metadata_image import Key, MetadataImage
from zkcdc.capture.kraft.metadata_records import ControlRecord, Entry, MetadataRecord
from zkcdc.capture.kraft.zk_tree import Change, render, rendered, whole_tree
from zkcdc.capture.records import ChangeRecord, Source, Znode
from zkcdc.capture.secret_redaction import DEFAULT_REDACTOR, Redact
from zkcdc.capture.tracker import Tracker, TrackerState, change_record
from zkcdc.ground.change_types import EventType, Op

MODE = "kraft"


def _depth(path: str) -> int:
    return path.count("/")


class KraftTracker:
    def __init__(
        self,
        state: TrackerState,
        now_ms: Callable[[], int],
        redact: Redact = DEFAULT_REDACTOR.data,
        image: MetadataImage | None = None,
    ) -> None:
        self.state = state
        self.image = image or MetadataImage()
        self._now_ms = now_ms
        self._redact = redact
        self._watch_like = Tracker(state, now_ms, mode=MODE, redact=redact)

    @property
    def next_offset(self) -> int:
        """The first offset not given out yet (0 on a first start)."""
        return self.state.zxid + 1 if self.state.tree else 0

    def replay(self, entries: Iterable[Entry]) -> None:
        """Brings the image to where the known tree is, without records (a restart)."""
        for entry in entries:
            if isinstance(entry, MetadataRecord | ControlRecord):
                self.image.apply(entry)

    def adopt(self, image: MetadataImage) -> None:
        """Takes `image` as the one behind the known tree, with the epoch base that tree was
        rendered with (0 unless a ZooKeeper capture's epochs were ahead at a take-over)."""
        known = self.state.tree.get("/controller_epoch")
        try:
            epoch = int(known.data) if known is not None and known.data else None
        except ValueError:
            epoch = None
        image.epoch_base = 0 if epoch is None else max(0, epoch - image.quorum.epoch)
        self.image = image

    def load(self, image: MetadataImage, last_offset: int, ts_ms: int) -> list[ChangeRecord]:
        """The image as of `last_offset` (a snapshot, or the log up to it) as the tree: READ
        records the first time, otherwise what differs from the known tree: after a gap in the
        log, or when the known tree is another source's (a cluster migrated from ZooKeeper
        whose stream this capture takes over; znodes KRaft does not hold, `/consumers`,
        `/admin`, ..., are left as ZooKeeper last had them). Ends with a heartbeat."""
        self.adopt(image)
        tree = self.state.tree
        first = not tree
        now = whole_tree(image)
        records: list[ChangeRecord] = []
        for path in sorted(now, key=lambda p: (_depth(p), p)):
            known = tree.get(path)
            # A ZooKeeper capture read a znode without data as None, KRaft's parents are b"".
            if known is not None and (known.data or b"") == self._redact(path, now[path]):
                continue
            if not first:
                records.append(_compared(self._write(path, now[path], last_offset, ts_ms)))
                continue
            after = Znode(self._redact(path, now[path]), 0, last_offset, last_offset, ts_ms,
                          ts_ms, 0)  # fmt: skip
            tree[path] = after
            records.append(change_record(
                self.state, Op.READ, path, None, after, zxid=last_offset, ts_ms=ts_ms,
                captured_ms=self._now_ms(), skipped=0, source=Source(MODE, None, True),
            ))  # fmt: skip
        gone = sorted((p for p in tree if p not in now and rendered(p)),
                      key=lambda p: (-_depth(p), p))  # fmt: skip
        for path in gone:
            records.append(self._record(Op.DELETE, path, tree.pop(path), None, last_offset, ts_ms))
        self.state.zxid = last_offset
        records.append(self.heartbeat(ts_ms))
        return records

    def heartbeat(self, ts_ms: int | None = None) -> ChangeRecord:
        record = self._watch_like.heartbeat()
        return record if ts_ms is None else dataclasses.replace(record, ts_ms=ts_ms)

    def apply(self, entry: Entry) -> list[ChangeRecord]:
        """The records of one committed metadata record (none for most: NoOps, records inside
        a transaction until its end, producer ids, ACLs)."""
        if entry.offset < self.next_offset:
            return []  # given out before a restart
        self.state.zxid = entry.offset
        if not isinstance(entry, MetadataRecord | ControlRecord):
            return []
        keys = self.image.apply(entry)
        return self._changes(keys, entry.offset, entry.timestamp_ms) if keys else []

    def _changes(self, keys: set[Key], offset: int, ts_ms: int) -> list[ChangeRecord]:
        changes: list[Change] = [c for key in keys for c in render(self.image, key)]
        tree = self.state.tree
        # Parents before children, children before parents when deleted; and by path, so that
        # every capture of the same log gives the same records in the same order.
        writes = sorted(
            (c for c in changes if c[1] is not None), key=lambda c: (_depth(c[0]), c[0])
        )
        deletes = sorted((c for c in changes if c[1] is None), key=lambda c: (-_depth(c[0]), c[0]))
        records: list[ChangeRecord] = []
        for path, data in writes:
            for parent in _ancestors(path):
                if parent not in tree:
                    records.append(self._write(parent, b"", offset, ts_ms))
            if path not in tree or tree[path].data != self._redact(path, data):
                records.append(self._write(path, data, offset, ts_ms))
        for path, _ in deletes:
            known = tree.pop(path, None)
            if known is not None:
                records.append(self._record(Op.DELETE, path, known, None, offset, ts_ms))
        return records

    def _write(self, path: str, data: bytes | None, offset: int, ts_ms: int) -> ChangeRecord:
        tree = self.state.tree
        known = tree.get(path)
        data = self._redact(path, data)
        if known is None:
            after = Znode(data, 0, offset, offset, ts_ms, ts_ms, 0)
            tree[path] = after
            return self._record(Op.CREATE, path, None, after, offset, ts_ms)
        after = Znode(data, known.version + 1, known.czxid, offset, known.ctime_ms, ts_ms, 0)
        tree[path] = after
        return self._record(Op.UPDATE, path, known, after, offset, ts_ms)

    def _record(
        self, op: Op, path: str, before: Znode | None, after: Znode | None, offset: int, ts_ms: int
    ) -> ChangeRecord:
        return change_record(
            self.state, op, path, before, after, zxid=offset, ts_ms=ts_ms,
            captured_ms=self._now_ms(), skipped=0, source=Source(MODE, None, False),
        )  # fmt: skip


def _ancestors(path: str) -> list[str]:
    """`/a/b/c` -> `/a`, `/a/b`: parents a record's znode needs (created empty if missing)."""
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _compared(record: ChangeRecord) -> ChangeRecord:
    """A record of a load's comparison, not of a write: a partition state that differs in its
    controller epoch alone is another source's way of numbering it (ZooKeeper's controller
    epoch against the Raft epoch of the controller that wrote it), so no rewrite is said."""
    kept = tuple(e for e in record.events if e.type is not EventType.PARTITION_STATE_REWRITTEN)
    return record if len(kept) == len(record.events) else dataclasses.replace(record, events=kept)
