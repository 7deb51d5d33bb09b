"""The watch source: a ZooKeeper session on Kafka's chroot, every znode read under a
persistent recursive watch (or one-shot watches), the tree walked again after every
reconnect. Needs nothing on ZooKeeper's machines; runs under the election."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState

from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.source import Turn
from zkcdc.capture.tracker import Tracker, TrackerState
from zkcdc.capture.watch import zookeeper
from zkcdc.capture.watch.messages import Message, Read, Reconnected, Synced, Unreadable, Wake
from zkcdc.capture.watch.tree_reader import TreeReader
from zkcdc.ground import logs
from zkcdc.ground.zookeeper_connection import split_hosts

log = logs.get("zkcdc.capture")

_MOST_A_TURN = 50_000  # messages: a storm's backlog is taken in turns, each one event-log block


class WatchSource:
    name = "watch"
    elected = True
    quick_acks = False

    def __init__(
        self,
        settings: CaptureSettings,
        metrics: CaptureMetrics,
        now_ms: Callable[[], int],
        sleep: Callable[[float], None],
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._now_ms = now_ms
        self._sleep = sleep
        self._inbox: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self.client: KazooClient | None = None
        self._tracker: Tracker | None = None
        self._reader: TreeReader | None = None
        self._generation = 0
        self._connected = False

    # -- Source ---------------------------------------------------------------------------
    def open(self) -> str:
        s = self._settings
        self.client = zookeeper.connect(
            s.connect_string(), s.session_timeout_s, s.connect_timeout_s,
            s.zookeeper_access(), s.connect_tries(), self._sleep,
        )  # fmt: skip
        self._connected = True
        return s.cluster or zookeeper.cluster_id(self.client, s.connect_string())

    def start(self, state: TrackerState) -> None:
        s, client = self._settings, self.client
        assert client is not None
        self._tracker = Tracker(state, self._now_ms, redact=s.redact())
        self._tracker.session_id = client.client_id[0] if client.client_id else None
        excluded = s.excluded_paths(split_hosts(s.connect_string())[1])
        recursive = s.watch_mode == "recursive"
        self._reader = TreeReader(client, self._inbox.put, self._now_ms, excluded, recursive)
        client.add_listener(self._on_state)
        self._metrics.session.set(1)
        self._tracker.begin_sync()
        self._generation = self._reader.sync()

    def poll(self, max_wait_s: float) -> Turn:
        tracker, reader = self._tracker, self._reader
        assert tracker is not None and reader is not None
        records: list[ChangeRecord] = []
        synced = False
        started = time.perf_counter()
        messages = _drain(self._inbox, max_wait_s)
        waited = time.perf_counter() - started  # the drain after the first message is quick
        for message in messages:
            if isinstance(message, Read):
                records.extend(
                    tracker.read(
                        message.path, message.znode, message.observed_ms,
                        message.announced_created,
                    )
                )  # fmt: skip
            elif isinstance(message, Unreadable):
                records.extend(tracker.unreadable_znode(
                    message.path, message.what, message.reason, message.observed_ms
                ))  # fmt: skip
            elif isinstance(message, Synced) and message.generation == self._generation:
                records.extend(tracker.end_sync())
                synced = True
            elif isinstance(message, Reconnected):
                self._resync(tracker, reader)
        self._metrics.unreadable.set(len(tracker.unreadable))
        return Turn(records, caught_up=True, synced=synced, waited_s=waited)

    def heartbeat(self) -> ChangeRecord:
        assert self._tracker is not None
        return self._tracker.heartbeat()

    def wake(self) -> None:
        # On CPython 3.11 a SimpleQueue.get(timeout) whose deadline passes while a signal
        # handler runs blocks until the next put, forever on an idle tree.
        self._inbox.put(Wake())

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self.client is not None:
            self.client.remove_listener(self._on_state)
            self.client.stop()
            self.client.close()

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def position(self) -> dict[str, object]:
        tracker = self._tracker
        watches = None if self._reader is None else self._reader.recursive
        return {
            "session_id": None if tracker is None else tracker.session_id,
            "watches": "recursive" if watches else "one-shot",
            "unreadable_znodes": 0 if tracker is None else len(tracker.unreadable),
        }

    @property
    def where(self) -> str:
        return self._settings.connect_string()

    # -- sessions -------------------------------------------------------------------------
    def _on_state(self, kazoo_state: str) -> None:
        """kazoo's thread: the session's state changed."""
        self._connected = kazoo_state == KazooState.CONNECTED
        self._metrics.session.set(1 if self._connected else 0)
        log.warning("zookeeper session", state=str(kazoo_state))
        if kazoo_state == KazooState.CONNECTED:
            self._inbox.put(Reconnected())

    def _resync(self, tracker: Tracker, reader: TreeReader) -> None:
        """kazoo re-arms no watches after a connection loss or a new session: walk the tree
        again and record exactly what differs from what is known."""
        client = self.client
        assert client is not None
        tracker.session_id = client.client_id[0] if client.client_id else None
        log.info("reconnected: re-syncing", session_id=tracker.session_id)
        tracker.begin_sync()
        self._generation = reader.sync()


def _drain(inbox: queue.SimpleQueue[Message], timeout: float) -> list[Message]:
    try:
        items = [inbox.get(timeout=timeout)] if timeout > 0 else [inbox.get_nowait()]
    except queue.Empty:
        return []
    while len(items) < _MOST_A_TURN:
        try:
            items.append(inbox.get_nowait())
        except queue.Empty:
            break
    return items
