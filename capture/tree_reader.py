"""The kazoo edge of capture: watches on every znode of the Kafka tree, reads pipelined.

Reads are issued asynchronously from the watch callbacks themselves, so a burst of changes is
one pipeline of requests rather than a round trip each; their results are handed over, in the
order ZooKeeper answered them, to `emit` as `("read", path, Znode | None, observed_ms)`. `sync()` walks the
whole tree (start-up, and after every reconnect, since kazoo drops its watches on a connection
loss) and ends with `("synced", generation)` once every read of the walk has been answered."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

from capture.records import Znode

Emit = Callable[[tuple[Any, ...]], None]


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
    ) -> None:
        self._client = client
        self._now_ms = now_ms
        self._emit = emit
        self._excluded = excluded
        self._lock = threading.Lock()
        self._children: dict[str, set[str]] = {}
        self._generation = 0
        self._outstanding = 0
        self._closed = False

    def close(self) -> None:
        """No new reads from here on (kazoo's threads may still deliver a few answers)."""
        self._closed = True

    def sync(self) -> int:
        """Walks and watches the whole tree; returns the walk's generation number."""
        with self._lock:
            self._generation += 1
            self._outstanding = 0
            self._children.clear()
            generation = self._generation
        self._visit("/", generation)
        return generation

    # -- requests ------------------------------------------------------------------------
    def _visit(self, path: str, generation: int | None) -> None:
        """Reads (and watches) a znode's data and its children."""
        if self._excluded(path):
            return
        self._read_data(path, generation)
        self._read_children(path, generation)

    def _read_data(self, path: str, generation: int | None) -> None:
        if self._closed:
            return
        self._count(generation, +1)
        try:
            result = self._client.get_async(path, watch=self._on_data_watch)
        except KazooException:
            self._count(generation, -1)  # closing: the next sync reads it
            return
        result.rawlink(lambda r: self._on_data(path, r, generation))

    def _read_children(self, path: str, generation: int | None) -> None:
        if self._closed:
            return
        self._count(generation, +1)
        try:
            result = self._client.get_children_async(path, watch=self._on_child_watch)
        except KazooException:
            self._count(generation, -1)
            return
        result.rawlink(lambda r: self._on_children(path, r, generation))

    # -- watch callbacks (kazoo's callback thread) --------------------------------------
    def _on_data_watch(self, event: WatchedEvent) -> None:
        if event.type in (EventType.CHANGED, EventType.DELETED, EventType.CREATED):
            self._read_data(event.path, None)

    def _on_child_watch(self, event: WatchedEvent) -> None:
        if event.type == EventType.CHILD:
            self._read_children(event.path, None)

    # -- results (kazoo's completion thread, in answer order) ---------------------------
    def _on_data(self, path: str, result: Any, generation: int | None) -> None:
        try:
            data, stat = result.get_nowait()
        except NoNodeError:
            self._emit(("read", path, None, self._now_ms()))
            self._relist_parent(path, generation)
        except KazooException:
            pass  # connection lost: the re-sync after reconnecting reads it again
        else:
            self._emit(("read", path, znode(data, stat), self._now_ms()))
        self._count(generation, -1)

    def _on_children(self, path: str, result: Any, generation: int | None) -> None:
        try:
            names = set(result.get_nowait())
        except KazooException:
            names = None  # gone (its data read says so) or connection lost (re-sync)
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
            self._emit(("synced", generation))
