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
        self._disconnected_at: float | None = None
        self._next_probe = 0.0
        self._pending: list[ChangeRecord] = []  # given out with the next turn
        self._went_back: str | None = None  # what a probe found: ZooKeeper behind this session

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
        self._check_history(self._tracker)
        self._generation = self._reader.sync()

    def poll(self, max_wait_s: float) -> Turn:
        tracker, reader = self._tracker, self._reader
        assert tracker is not None and reader is not None
        self._probe_if_refused()
        records: list[ChangeRecord] = self._pending
        self._pending = []
        synced = False
        started = time.perf_counter()
        self._metrics.watch_inbox.set(self._inbox.qsize())
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
        if self._connected:
            self._disconnected_at = None
        elif self._disconnected_at is None:
            self._disconnected_at = time.monotonic()
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
        self._check_history(tracker)
        self._generation = reader.sync()

    # -- ZooKeeper's history ----------------------------------------------------------------
    def _check_history(self, tracker: Tracker) -> None:
        """Before a walk: an ensemble whose newest zxid is behind what the known tree holds has
        another history (rebuilt, or restored from a backup). Say so, and have the walk record
        every difference from the known tree whatever the zxids say."""
        client = self.client
        assert client is not None
        known = tracker.known_position()
        try:
            newest = zookeeper.newest_zxid(client)
        except Exception as exc:  # the walk after it meets the same trouble and says so
            log.warning("cannot read ZooKeeper's newest zxid", reason=repr(exc))
            return
        went_back, self._went_back = self._went_back, None
        if known <= newest and went_back is None:
            return  # (a read older than what is known still tells, in the tracker)
        behind = went_back or f"newest zxid {newest:#x} is behind the {known:#x} capture recorded"
        reason = (
            f"ZooKeeper's {behind}: its history is not the one capture saved (an ensemble "
            f"rebuilt or restored from a backup); every difference from the saved tree is "
            f"recorded"
        )
        log.warning("zookeeper history changed", newest_zxid=newest, recorded_zxid=known,
                    zookeeper=self.where)  # fmt: skip
        self._pending.append(tracker.history_changed(reason))

    def history_went_back(self, reason: str) -> None:
        """Found elsewhere (the election's client): the walk records a change of history."""
        self._went_back = reason

    def _probe_if_refused(self) -> None:
        """A server whose history is behind the zxid this session saw refuses the session
        ("client has seen zxid ..."), and kazoo retries forever. When disconnected for a while,
        ask with a client that has seen nothing; if the ensemble is behind, let this one
        connect (the walk after it then records every difference)."""
        since, client = self._disconnected_at, self.client
        now = time.monotonic()
        wait = self._settings.session_timeout_s
        if since is None or client is None or now - since < wait or now < self._next_probe:
            return
        self._next_probe = now + wait
        newest = zookeeper.probe_newest_zxid(
            self._settings.connect_string(), self._settings.zookeeper_access(),
            self._settings.connect_timeout_s,
        )  # fmt: skip
        if newest is not None and newest < client.last_zxid:
            log.warning("zookeeper is behind what this session saw: reconnecting to its history",
                        newest_zxid=newest, seen_zxid=client.last_zxid)  # fmt: skip
            self._went_back = (
                f"newest zxid {newest:#x} is behind the {client.last_zxid:#x} this session saw"
            )
            client.last_zxid = 0


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
