"""The kazoo edge of capture: watches on every znode of the Kafka tree, reads pipelined.

Where the server has them (ZooKeeper 3.6+), one persistent recursive watch on the root announces
every create, change and delete under it, and each announcement is answered with a read: no
blind window between a notification and re-arming, so under a storm far more versions are seen
than with one-shot watches. On older servers (or `recursive=False`) every znode carries one-shot
data and child watches, re-armed by the read each of them triggers.

Reads are issued asynchronously from the notification callbacks themselves, so a burst of
changes is one pipeline of requests rather than a round trip each; their results are handed
over, in the order ZooKeeper answered them, to `emit` as `Read` messages. `sync()` walks the
whole tree (start-up, and after every reconnect, since the server drops watches with the
connection) and ends with `Synced(generation)` once every read of the walk has been
answered."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, _prefix_root
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError, UnimplementedError
from kazoo.protocol.serialization import GetChildren, GetData
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from zkcdc.capture.records import Znode
from zkcdc.capture.watch.kazoo_pipeline import Pipeline
from zkcdc.capture.watch.messages import Message, Read, Synced, Unreadable
from zkcdc.capture.watch.persistent_watch import PERSISTENT_RECURSIVE, AddWatch, route_notifications
from zkcdc.ground import logs

log = logs.get("zkcdc.capture")

Emit = Callable[[Message], None]


def znode(data: bytes | None, stat: ZnodeStat) -> Znode:
    return Znode(
        data=data,
        version=stat.version,
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        ctime_ms=stat.ctime,
        mtime_ms=stat.mtime,
        ephemeral_owner=stat.ephemeralOwner,
    )


def child_path(parent: str, name: str) -> str:
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


class TreeReader:
    def __init__(
        self,
        client: KazooClient,
        emit: Emit,
        now_ms: Callable[[], int],
        excluded: Callable[[str], bool] = lambda p: False,
        recursive: bool = True,
    ) -> None:
        self._client = client
        self._now_ms = now_ms
        self._emit = emit
        self._excluded = excluded
        self._lock = threading.Lock()
        self._children: dict[str, set[str]] = {}
        # Reads sent on a notification and not yet answered, by path (see _on_data).
        self._notified_reads: dict[str, int] = {}
        self._generation = 0
        self._outstanding = 0
        self._closed = False
        self._pipeline = Pipeline(client)
        # None: not known yet whether the server has persistent recursive watches.
        self.recursive: bool | None = None if recursive else False
        if recursive:
            route_notifications(client, self._on_notification)

    def close(self) -> None:
        """No new reads from here on (kazoo's threads may still deliver a few answers)."""
        self._closed = True

    def sync(self) -> int:
        """Walks and watches the whole tree; returns the walk's generation number."""
        with self._lock:
            self._generation += 1
            self._outstanding = 0
            self._children.clear()
            # The last connection's reads were answered or failed before a walk starts again.
            self._notified_reads.clear()
            generation = self._generation
        if self.recursive is False:
            # Held while the walk starts: an early answer must not end the walk at zero.
            self._count(generation, +1)
            self._visit("/", generation)
            self._count(generation, -1)
            return generation
        # The watch is in place before any read of the walk is answered (one session's
        # requests are answered in order), so nothing can change unseen between the two.
        self._count(generation, +1)
        self._pipeline.request(
            AddWatch(self._full("/"), PERSISTENT_RECURSIVE),
            lambda _, error: self._on_watch_added(error, generation),
        )
        return generation

    def _on_watch_added(self, error: Exception | None, generation: int) -> None:
        if error is None:
            self.recursive = True
        elif isinstance(error, UnimplementedError):
            self.recursive = False  # ZooKeeper before 3.6: one-shot watches from here on
        elif isinstance(error, KazooException):
            self._count(generation, -1)  # connection lost: the re-sync after it starts over
            return
        else:
            log.error("addWatch failed: one-shot watches from here on", error=repr(error))
            self.recursive = False
        self._visit("/", generation)
        self._count(generation, -1)

    # -- requests (answers come on kazoo's connection thread, in answer order) -------------
    def _full(self, path: str) -> str:
        return str(_prefix_root(self._client.chroot, path))

    def _visit(self, path: str, generation: int | None) -> None:
        """Reads (and watches) a znode's data and its children."""
        if self._excluded(path):
            return
        if self.recursive:
            # Children are listed (with a child watch) after the data's stat: see _on_data.
            self._read_data(path, generation, list_children=True)
        else:
            self._read_data(path, generation)
            self._read_children(path, generation)  # sets the child watch, children or not

    def _read_data(
        self,
        path: str,
        generation: int | None,
        list_children: bool = False,
        announced_created: bool = False,
        notified: bool = False,
    ) -> None:
        """`notified`: sent on the recursive watch's notification of a change to `path`."""
        if self._closed:
            return
        self._count(generation, +1)
        watch = None if self.recursive else self._on_data_watch
        if notified:
            with self._lock:
                self._notified_reads[path] = self._notified_reads.get(path, 0) + 1
        self._pipeline.request(
            GetData(self._full(path), watch),
            lambda value, error: self._on_data(
                path, value, error, generation, list_children, announced_created, notified
            ),
        )

    def _read_children(self, path: str, generation: int | None) -> None:
        if self._closed:
            return
        self._count(generation, +1)
        # A persistent recursive watch says nothing of a child capture may not read
        # (ZooKeeper 3.8.4+, CVE-2024-23944); a child watch on its parent does: the parent's
        # listing, read again, shows the new name, and its refused read records it.
        watch = self._on_child_watch if not self.recursive or child_watched(path) else None
        self._pipeline.request(
            GetChildren(self._full(path), watch),
            lambda value, error: self._on_children(path, value, error, generation),
        )

    # -- notifications ------------------------------------------------------------------
    def _on_notification(self, kind: EventType, path: str) -> None:
        """The recursive watch (connection thread): a read per notification, sent in the same
        turn, so it is answered right after its write."""
        if self.recursive and not self._excluded(path):
            self._read_data(path, None, announced_created=kind == EventType.CREATED, notified=True)

    def _on_data_watch(self, event: WatchedEvent) -> None:  # one-shot: kazoo's callback thread
        if event.type in (EventType.CHANGED, EventType.DELETED, EventType.CREATED):
            self._read_data(event.path, None)

    def _on_child_watch(self, event: WatchedEvent) -> None:
        if event.type == EventType.CHILD:
            self._read_children(event.path, None)

    # -- answers (kazoo's connection thread, in answer order) ----------------------------
    def _on_data(
        self,
        path: str,
        value: Any,
        error: Exception | None,
        generation: int | None,
        list_children: bool = False,
        announced_created: bool = False,
        notified: bool = False,
    ) -> None:
        with self._lock:
            if notified:
                left = self._notified_reads.get(path, 1) - 1
                if left > 0:
                    self._notified_reads[path] = left
                else:
                    self._notified_reads.pop(path, None)
            # A read of a walk or a listing, sent before a change to the path and answered
            # after ZooKeeper's notice of it (notices come before any answer showing their
            # change): its answer may show a state newer than notices whose reads are not
            # answered yet, and reported now it would come ahead of them. The read that
            # path's notice sent reports it, in order. A notified read is never left out.
            stale = not notified and self._notified_reads.get(path, 0) > 0
        if error is None:
            data, stat = value
            if not stale:
                self._emit(Read(path, znode(data, stat), self._now_ms()))
            # Listed where there are children, and where a child may come that only a child
            # watch would tell of (child_watched). An ephemeral znode never has children.
            if list_children and (
                stat.numChildren > 0 or (stat.ephemeralOwner == 0 and child_watched(path))
            ):
                self._read_children(path, generation)  # counted before this read's -1
        elif isinstance(error, NoNodeError):
            # Announced as created, gone before its read: a znode nobody saw (a request
            # created and handled within a few milliseconds), which must not pass in silence.
            if not stale:
                self._emit(Read(path, None, self._now_ms(), announced_created))
            if self.recursive:
                with self._lock:
                    self._forget(path)
            else:
                self._relist_parent(path, generation)
        elif isinstance(error, NoAuthError) and not stale:
            # Its ACL gives capture no READ: recorded as such (never silence). Its children,
            # if any, cannot be listed either (listing needs the same READ). A stale refusal,
            # as a stale answer, is left to the read the path's notice sent.
            self._emit(Unreadable(path, "data", _refusal(error), self._now_ms()))
        # else: a stale refusal, or the connection lost or closing (the re-sync after
        # reconnecting reads it again)
        self._count(generation, -1)

    def _on_children(
        self, path: str, value: Any, error: Exception | None, generation: int | None
    ) -> None:
        names = set(value) if error is None else None  # else gone, or connection lost
        if isinstance(error, NoAuthError):
            self._emit(Unreadable(path, "children", _refusal(error), self._now_ms()))
        if names is not None:
            with self._lock:
                known = self._children.get(path, set())
                self._children[path] = names
                for name in known - names:
                    self._forget(child_path(path, name))
            for name in sorted(names - known):
                self._visit(child_path(path, name), generation)
            for name in sorted(known - names):
                # Its own watch reports the delete too; this read makes sure of it.
                self._read_data(child_path(path, name), generation)
        self._count(generation, -1)

    def _relist_parent(self, path: str, generation: int | None) -> None:
        """A znode is gone, and no watch is left on it. If it is created again the parent's
        listing must show it as new: forget it there and list the parent again (this listing
        runs after the read that found nothing, so a re-creation before or after it is seen)."""
        if path == "/":
            return
        parent = path.rsplit("/", 1)[0] or "/"
        with self._lock:
            self._children.get(parent, set()).discard(path.rsplit("/", 1)[1])
            self._forget(path)
        self._read_children(parent, generation)

    def _forget(self, path: str) -> None:
        """A deleted subtree's children lists are stale: a re-created znode is walked afresh."""
        for name in self._children.pop(path, set()):
            self._forget(child_path(path, name))

    def _count(self, generation: int | None, delta: int) -> None:
        with self._lock:
            if generation != self._generation:
                return
            self._outstanding += delta
            done = delta < 0 and self._outstanding == 0
        if done:
            self._emit(Synced(generation))


# Kafka's bulk: a partition's folder and state znode, a topic's config. Watched, they would
# cost ZooKeeper a watch each (millions, on a large cluster); a child of theirs that capture
# may not read is recorded at the next walk.
_UNWATCHED = re.compile(r"/brokers/topics/[^/]+/partitions/[^/]+(/state)?|/config/topics/[^/]+")


def child_watched(path: str) -> bool:
    """Whether capture keeps a child watch on `path` under a recursive watch: a child created
    there that capture may not read is then recorded as ZNODE_UNREADABLE as soon as ZooKeeper
    tells the watch (within one round trip of the create)."""
    return _UNWATCHED.fullmatch(path) is None


def _refusal(error: Exception) -> str:
    return f"ZooKeeper refused the read: {type(error).__name__} (no READ permission for capture)"
