"""One active capture per cluster: a ZooKeeper lock (kazoo's Lock recipe) on its own session.
A standby meanwhile follows the changes topic, so it takes over from the active's last record.

An active that loses its session (a ZooKeeper outage past the session timeout, a stall, its
lock node deleted) steps down and campaigns again on the same client, which kazoo reconnects
with a new session, as Curator's LeaderLatch and kazoo's Election recipes do: a fleet rides out
a ZooKeeper restart without a supervisor. While the session is only suspended (no answer yet,
maybe still valid) the active gives nothing out: if it expired, a standby may already be on."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.recipe.watchers import DataWatch

from zkcdc.capture.delivery.topic_follower import TopicFollower
from zkcdc.capture.encoding.avro_codec import change_decoder
from zkcdc.capture.errors import CaptureError
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.tracker import TrackerState
from zkcdc.capture.watch import zookeeper
from zkcdc.ground import logs, systemd_notify
from zkcdc.ground.zookeeper_connection import split_hosts

log = logs.get("zkcdc.capture")


class LostElection(CaptureError):
    """Another daemon may be active now."""


class Election:
    def __init__(
        self,
        settings: CaptureSettings,
        stop: threading.Event,
        on_lost: Callable[[str], None],
        turned: Callable[[], None],
        sleep: Callable[[float], None],
    ) -> None:
        self._settings = settings
        self._stop = stop
        self._on_lost = on_lost
        self._turned = turned
        self._sleep = sleep
        self._client: KazooClient | None = None
        self._follower: TopicFollower | None = None  # made at the first campaign, kept
        self._lock: Any = None
        self.active = False
        self.lost = False
        self.suspended = False  # the session's connection is down: it may have expired
        self._suspended_at: float | None = None
        self._next_probe = 0.0
        # What the probe found (ZooKeeper behind what this client saw), for the next term's
        # walk to record as a change of history.
        self.went_back: str | None = None

    def close(self) -> None:
        if self._follower is not None:
            self._follower.close()
        if self._client is not None:
            self._client.stop()
            self._client.close()

    def win(self, cluster: str, fence: Callable[[], bool] = lambda: True) -> TrackerState | None:
        """Blocks until this daemon holds the cluster's lock. Returns the state the topic's
        records describe (empty without Kafka), or None when stopped first. `fence` runs once
        the lock is held, before the topic is read to its end (the new producer fencing the
        last active's). Called again after a lost term, it campaigns on the same client,
        whatever ZooKeeper's state meanwhile; after a term that ended with its producer while
        the lock held (`holds`), it fences and reads the topic again without campaigning."""
        s = self._settings
        if self._client is None:
            self._client = zookeeper.connect(
                split_hosts(s.connect_string())[0],
                s.session_timeout_s,
                s.connect_timeout_s,
                s.zookeeper_access(),
                s.connect_tries(),
                self._sleep,
                own_nodes=True,
            )
            self._client.add_listener(self._on_state)
        client = self._client
        held = self.holds()
        if not held:
            self.active, self.lost, self.suspended, self._lock = False, False, False, None
        path, me = f"{s.ha_path}/{cluster}", f"{socket.gethostname()}:{os.getpid()}"
        kafka = s.kafka()
        if self._follower is None and kafka is not None:
            self._follower = TopicFollower(
                kafka, s.topic, cluster, change_decoder(s.schema_registry)
            )
        follower = self._follower
        try:
            if not held:
                self._campaign(client, path, me, cluster, follower)
                if self._lock is None:
                    return None  # stopped while standby
            if not fence():
                return None  # stopped while Kafka did not answer
            if follower is None:
                return TrackerState(cluster=cluster)
            follower.catch_up(s.connect_timeout_s, self._turned)
            return follower.state()
        finally:
            if follower is not None:
                follower.rest()

    def holds(self) -> bool:
        """This daemon still holds the lock on a live session: a term that ended for another
        reason (its producer lost) goes on without campaigning, so no standby takes over
        without the records this daemon's event log holds."""
        return self.active and not self.lost and self._lock is not None and self.connected

    def _campaign(
        self,
        client: KazooClient,
        path: str,
        me: str,
        cluster: str,
        follower: TopicFollower | None,
    ) -> None:
        """Waits for the lock (following the topic meanwhile); `self._lock` stays None when
        stopped first."""
        campaign = _Campaign(client, path, me, self._stop)
        campaign.start()
        announced = unreachable = False
        # A free lock is won at once, without a word of standby.
        while not campaign.won.wait(0.05 if announced else 0.5):
            if self._stop.is_set():
                campaign.cancel()
                return
            self._turned()
            self.probe_if_refused()
            if campaign.failure is not None and not unreachable:
                log.warning("campaigning: ZooKeeper does not answer yet",
                            election=path, reason=campaign.failure)  # fmt: skip
                unreachable = True
            if not announced:
                systemd_notify.notify("READY=1\nSTATUS=standby")
                log.info("standby", cluster=cluster, election=path)
                announced = True
            if follower is not None:
                follower.poll(0.5)
        lock = campaign.lock
        self.active = True
        self._lock = lock
        self._watch_own_lock(client, f"{lock.path}/{lock.node}")

    def probe_if_refused(self) -> None:
        """An ensemble replaced by one with an older history refuses this client's session
        ("client has seen zxid ..."), and kazoo retries forever: disconnected for a session's
        time, ask with a client that has seen nothing; if the ensemble is behind, let this one
        reconnect (with a new session: the term, if any, is lost)."""
        s, client, since = self._settings, self._client, self._suspended_at
        now = time.monotonic()
        wait = s.session_timeout_s
        if client is None or since is None or now - since < wait or now < self._next_probe:
            return
        self._next_probe = now + wait
        newest = zookeeper.probe_newest_zxid(
            s.connect_string(), s.zookeeper_access(), s.connect_timeout_s
        )
        if newest is not None and newest < client.last_zxid:
            log.warning("zookeeper is behind what the election's session saw: reconnecting",
                        newest_zxid=newest, seen_zxid=client.last_zxid)  # fmt: skip
            self.went_back = (
                f"newest zxid {newest:#x} is behind the {client.last_zxid:#x} this daemon's "
                "election session saw"
            )
            client.last_zxid = 0

    @property
    def connected(self) -> bool:
        """The election's session is connected (kazoo's CONNECTED)."""
        client = self._client
        return client is not None and client.state == KazooState.CONNECTED

    def step_down(self) -> None:
        """This term is over (lost): its lock recipe let go, so the next campaign starts
        clean; a node still held (a session that survived) is deleted, handing the lock on."""
        lock, self._lock, self.active = self._lock, None, False
        if lock is None:
            return
        with contextlib.suppress(KazooException):  # its session gone, the node with it
            lock.release()

    def _on_state(self, state: str) -> None:
        """kazoo's thread: SUSPENDED holds the active's giving out until CONNECTED (the session
        survived) or LOST (it did not: step down)."""
        self.suspended = state == KazooState.SUSPENDED
        if state == KazooState.CONNECTED:
            self._suspended_at = None
        elif self._suspended_at is None:
            self._suspended_at = time.monotonic()
        if state == KazooState.LOST and self.active and not self._stop.is_set():
            self._lose("the election's ZooKeeper session expired")

    def _lose(self, reason: str) -> None:
        if not self.lost:
            self.lost = True
            self._on_lost(reason)

    def _watch_own_lock(self, client: KazooClient, node: str) -> None:
        """Someone deleting this daemon's lock node (an operator, a tool, a standby's lock
        recipe after a session mix-up) hands the election on: step down at once, so that two
        actives never run."""

        def changed(data: bytes | None, stat: Any, event: Any = None) -> bool:
            if stat is None and not self._stop.is_set():
                held = self._lock
                if not self.active or held is None or f"{held.path}/{held.node}" != node:
                    return False  # a term already over
                log.error("this daemon's lock node is gone: stepping down", node=node)
                self._lose(f"its lock node {node} was deleted")
                return False  # no further calls
            return True

        DataWatch(client, node, changed)

    def confirm(self) -> None:
        """After a stall (a stopped or frozen process, a long pause) the session may have
        expired and a standby taken over while this daemon was not looking; kazoo tells only
        once its own thread runs. Before giving out anything more, ask ZooKeeper whether this
        daemon's lock node is still there: two actives would give out the same seqs."""
        if self._client is None or self._lock is None:
            return
        node = f"{self._lock.path}/{self._lock.node}"
        try:
            held = self._client.exists_async(node).get(timeout=self._settings.session_timeout_s)
        except Exception:  # expired, closed, or no answer within a session: not provably held
            held = None
        if held is None:
            self.lost = True
            raise LostElection(
                "lost the election after a stall past the session timeout; another daemon may "
                "be active now (nothing of the stalled turn was given out)"
            )


class _Campaign(threading.Thread):
    """Waits in the lock's queue on a thread of its own, so the contender node stays while the
    standby follows the topic: who has waited longest is next (a daemon that just stepped down
    queues behind a standby that was waiting). ZooKeeper away or the session gone: it queues
    again with a fresh recipe once ZooKeeper answers."""

    def __init__(self, client: KazooClient, path: str, me: str, stop: threading.Event) -> None:
        super().__init__(name="election-campaign", daemon=True)
        self._client, self._path, self._me, self._stop = client, path, me, stop
        self.lock: Any = client.Lock(path, identifier=me)
        self.won = threading.Event()
        self.failure: str | None = None  # the latest reason it had to queue again

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.lock.acquire(blocking=True):
                    self.won.set()
                return  # won, or cancelled (a stop)
            except KazooException as exc:
                if self._stop.is_set():
                    return
                self.failure = repr(exc)
                self.lock = self._client.Lock(self._path, identifier=self._me)
                self._stop.wait(0.5)

    def cancel(self) -> None:
        self.lock.cancel()
