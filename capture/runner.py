"""`zkcdc capture`: snapshot, then stream every change of Kafka's ZooKeeper tree.

The loop is single-threaded over a queue: kazoo's threads only read and hand results over, so
the tracker sees one ordered stream; each turn writes its records as one event-log block and
hands them to the producer."""

from __future__ import annotations

import faulthandler
import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout
from kazoo.recipe.watchers import DataWatch

from zkcdc.capture.collector_pacing import CollectorPacing
from zkcdc.capture.delivery.record_outlet import RecordOutlet, prepare_topic
from zkcdc.capture.delivery.topic_follower import TopicFollower
from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.capture.errors import CaptureError
from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.tracker import Tracker, TrackerState
from zkcdc.capture.watch import zookeeper
from zkcdc.capture.watch.tree_reader import TreeReader
from zkcdc.ground import logs, systemd_notify
from zkcdc.ground.kafka_connection import KafkaConnectionError
from zkcdc.ground.metrics_server import serve

log = logs.get("zkcdc.capture")


class CaptureDaemon:
    def __init__(
        self,
        settings: CaptureSettings,
        *,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self._now = now
        self._sleep = sleep
        self._stop = threading.Event()
        self._last_turn = time.monotonic()
        self._finished = threading.Event()
        self._inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.metrics = CaptureMetrics()
        self._connected = False
        self._active = False
        self._lost_election = False
        self.zk_client: KazooClient | None = None
        self._election: tuple[KazooClient, Any] | None = None  # (client, lock) while active

    def now_ms(self) -> int:
        return int(self._now() * 1000)

    def stop(self, *_: Any) -> None:
        if not self._stop.is_set():
            systemd_notify.notify("STOPPING=1")
        self._stop.set()
        # Wakes the main loop's inbox.get: on CPython 3.11 a SimpleQueue.get(timeout) whose
        # deadline passes while a signal handler runs blocks until the next put, forever on
        # an idle tree.
        self._inbox.put(("stop",))

    def _watchdog(self, limit_s: float = 25.0) -> None:
        """A stop that does not finish in time is a bug: show every thread's stack, then exit
        non-zero rather than hang (the event log already holds every record)."""
        self._stop.wait()
        if self._finished.wait(limit_s):
            return
        log.error("shutdown did not finish; thread stacks follow", limit_s=limit_s)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(1)

    def install_signal_handlers(self) -> None:
        # kazoo's threads answer watches; a short GIL switch interval keeps the main loop's
        # encoding from delaying them (the default 5 ms shows up directly as capture lag).
        sys.setswitchinterval(0.0001)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        # Started here, not in the handler: a handler starting a thread can deadlock on
        # threading's own locks when it interrupts the main thread's Thread.start.
        threading.Thread(target=self._watchdog, name="shutdown-watchdog", daemon=True).start()
        systemd_notify.keep_alive(lambda: self._health()[0], self._stop)

    # -- start-up -----------------------------------------------------------------------
    def run(self) -> None:
        s = self.settings
        connect_string = s.connect_string()
        retries = 1_000_000 if s.wait else 0
        client = zookeeper.connect(
            connect_string,
            s.session_timeout_s,
            s.connect_timeout_s,
            s.zookeeper_access(),
            retries,
            self._sleep,
        )
        self.zk_client = client
        election_client: KazooClient | None = None
        server = None
        try:
            cluster = s.cluster or zookeeper.cluster_id(client, connect_string)
            server = self._prepare_outputs(retries)
            hosts, _ = zookeeper.split_hosts(connect_string)
            election_client = zookeeper.connect(
                hosts,
                s.session_timeout_s,
                s.connect_timeout_s,
                s.zookeeper_access(),
                retries,
                self._sleep,
                own_nodes=True,
            )
            follower_state = self._wait_for_election(election_client, cluster)
            if follower_state is None:
                return  # stopped while standby
            self._capture(client, cluster, follower_state)
        finally:
            client.stop()
            client.close()
            if election_client is not None:
                election_client.stop()
                election_client.close()
            if server is not None:
                server.shutdown()
            self._finished.set()
        if self._lost_election:
            raise CaptureError("lost the election session; another daemon may be active now")

    def _prepare_outputs(self, retries: int) -> ThreadingHTTPServer | None:
        """Kafka reachable and its topic there (if publishing); the metrics port served."""
        s = self.settings
        if s.kafka() is not None:
            self._check_kafka(retries)
            prepare_topic(s)
        if s.metrics_port is None:
            return None
        return serve(
            self.metrics.registry, s.metrics_host, s.metrics_port, self._health,
            s.metrics_web_config,
        )  # fmt: skip

    def _check_kafka(self, retries: int) -> None:
        kafka = self.settings.kafka()
        assert kafka is not None
        delay = 1.0
        for attempt in range(retries + 1):
            try:
                kafka.brokers_answering(self.settings.connect_timeout_s)
                return
            except KafkaConnectionError:
                if attempt == retries or self._stop.is_set():
                    raise
            self._sleep(delay)
            delay = min(delay * 2, 30.0)

    def turned(self) -> None:
        """The main loop went round: what systemd's watchdog (and /healthz) take as alive."""
        self._last_turn = time.monotonic()

    def _health(self) -> tuple[bool, str]:
        if not self._connected:
            return False, "zookeeper: not connected"
        stalled = time.monotonic() - self._last_turn
        if stalled > self.settings.session_timeout_s:
            return False, f"main loop stalled for {stalled:.0f} s"
        return True, "active" if self._active else "standby"

    # -- high availability --------------------------------------------------------------
    def _wait_for_election(self, client: KazooClient, cluster: str) -> TrackerState | None:
        """Blocks until this daemon holds the cluster's lock; a standby meanwhile follows the
        topic so it can take over from the active's last record. Returns that state (empty
        without Kafka), or None when stopped first."""
        s = self.settings
        self._connected = True
        lock = client.Lock(
            f"{s.ha_path}/{cluster}", identifier=f"{socket.gethostname()}:{os.getpid()}"
        )

        def on_state(state: str) -> None:
            if state == KazooState.LOST and self._active and not self._stop.is_set():
                self._lost_election = True
                self.stop()

        client.add_listener(on_state)
        follower = None
        kafka = s.kafka()
        if kafka is not None:
            follower = TopicFollower(kafka, s.topic, cluster, SingleObjectCodec())
        announced = False
        try:
            while not self._stop.is_set():
                try:
                    if lock.acquire(timeout=0.5):
                        break
                except LockTimeout:
                    pass
                self.turned()
                if not announced:
                    systemd_notify.notify("READY=1\nSTATUS=standby")
                    log.info("standby", cluster=cluster, election=f"{s.ha_path}/{cluster}")
                    announced = True
                if follower is not None:
                    follower.poll(0.5)
            else:
                return None
            self._active = True
            self._election = (client, lock)
            self._watch_own_lock(client, f"{lock.path}/{lock.node}")
            self.metrics.active.set(1)
            if follower is None:
                return TrackerState(cluster=cluster)
            follower.catch_up(s.connect_timeout_s, self.turned)
            return follower.state()
        finally:
            if follower is not None:
                follower.close()

    def _watch_own_lock(self, client: KazooClient, node: str) -> None:
        """Someone deleting this daemon's lock node (an operator, a tool, a standby's lock
        recipe after a session mix-up) hands the election on: step down at once, so that two
        actives never run."""

        def changed(data: bytes | None, stat: Any, event: Any = None) -> bool:
            if stat is None and not self._stop.is_set():
                log.error("this daemon's lock node is gone: stepping down", node=node)
                self._lost_election = True
                self.stop()
                return False  # no further calls
            return True

        DataWatch(client, node, changed)

    def _confirm_still_active(self) -> None:
        """After a stall (a stopped or frozen process, a long pause) the session may have
        expired and a standby taken over while this daemon was not looking; kazoo tells only
        once its own thread runs. Before giving out anything more, ask ZooKeeper whether this
        daemon's lock node is still there: two actives would give out the same seqs."""
        if self._election is None:
            return
        client, lock = self._election
        try:
            held = client.exists_async(f"{lock.path}/{lock.node}").get(
                timeout=self.settings.session_timeout_s
            )
        except Exception:  # expired, closed, or no answer within a session: not provably held
            held = None
        if held is None:
            self._lost_election = True
            raise CaptureError(
                "lost the election after a stall past the session timeout; another daemon may "
                "be active now (nothing of the stalled turn was given out)"
            )

    # -- capture ------------------------------------------------------------------------
    def _capture(self, client: KazooClient, cluster: str, followed: TrackerState) -> None:
        s = self.settings
        outlet = RecordOutlet(s, cluster, self.metrics, self._now)
        state = outlet.load(followed)
        outlet.open()
        tracker = Tracker(state, self.now_ms, redact=s.redact())
        tracker.session_id = client.client_id[0] if client.client_id else None
        log.info(
            "capturing",
            cluster=cluster,
            zookeeper=s.zookeeper,
            seq=state.seq,
            known_znodes=len(state.tree),
            topic=s.topic if outlet.publisher else None,
            event_log=str(s.event_log_path(cluster)),
        )
        excluded = excluded_paths(zookeeper.split_hosts(s.connect_string())[1], s.ha_path)
        reader = TreeReader(
            client, self._inbox.put, self.now_ms, excluded, recursive=s.watch_mode == "recursive"
        )

        def on_state(kazoo_state: str) -> None:
            self._connected = kazoo_state == KazooState.CONNECTED
            self.metrics.session.set(1 if self._connected else 0)
            if not self._stop.is_set():
                log.warning("zookeeper session", state=str(kazoo_state))
            if kazoo_state == KazooState.CONNECTED:
                self._inbox.put(("reconnected",))

        client.add_listener(on_state)
        self._connected = True
        self.metrics.session.set(1)
        tracker.begin_sync()
        generation = reader.sync()
        failing = True
        try:
            with CollectorPacing() as collector:
                self._loop(client, tracker, reader, generation, outlet, collector)
            failing = False
        finally:
            reader.close()
            client.remove_listener(on_state)
            outlet.close(tracker.state, failing)

    def _loop(
        self,
        client: KazooClient,
        tracker: Tracker,
        reader: TreeReader,
        generation: int,
        outlet: RecordOutlet,
        collector: CollectorPacing,
    ) -> None:
        s = self.settings
        next_heartbeat = self._now() + s.heartbeat_s
        last_out = time.monotonic()
        while not self._stop.is_set():
            self.turned()
            records: list[ChangeRecord] = []
            timeout = max(0.0, min(next_heartbeat - self._now(), 0.05))
            for item in _drain(self._inbox, timeout):
                kind = item[0]
                if kind == "read":
                    records.extend(tracker.read(item[1], item[2], item[3], item[4]))
                elif kind == "synced" and item[1] == generation:
                    records.extend(tracker.end_sync())
                    systemd_notify.notify("READY=1\nSTATUS=active, in sync")
                    log.info(
                        "in sync",
                        seq=tracker.state.seq,
                        known_znodes=len(tracker.state.tree),
                        watches="recursive" if reader.recursive else "one-shot",
                    )
                    warn_if_not_kafka(tracker.state.tree, s.connect_string())
                    collector.settle()  # the tree just read: long-lived, walked once
                elif kind == "reconnected":
                    # kazoo re-arms no watches after a connection loss or a new session: walk
                    # the tree again and record exactly what differs from what is known.
                    tracker.session_id = client.client_id[0] if client.client_id else None
                    log.info("reconnected: re-syncing", session_id=tracker.session_id)
                    tracker.begin_sync()
                    generation = reader.sync()
            now = self._now()
            if now >= next_heartbeat:
                records.append(tracker.heartbeat())
                next_heartbeat = now + s.heartbeat_s
            if records:
                if time.monotonic() - last_out > s.session_timeout_s / 3:
                    self._confirm_still_active()
                # Taken before giving out: a stall inside give_out (an fsync, a full queue)
                # must make the next turn ask again, not count as time known to be active.
                last_out = time.monotonic()
                outlet.give_out(records)
            outlet.tick(tracker.state)
            collector.tick()


def _drain(inbox: queue.SimpleQueue[tuple[Any, ...]], timeout: float) -> list[tuple[Any, ...]]:
    try:
        items = [inbox.get(timeout=timeout)] if timeout > 0 else [inbox.get_nowait()]
    except queue.Empty:
        return []
    while len(items) < 50_000:
        try:
            items.append(inbox.get_nowait())
        except queue.Empty:
            break
    return items


def excluded_paths(chroot: str, ha_path: str) -> Callable[[str], bool]:
    """With Kafka at the ZooKeeper root, zkcdc's own election znodes are not Kafka's tree."""
    if chroot:
        return lambda path: False
    return lambda path: path == ha_path or path.startswith(ha_path + "/")


def warn_if_not_kafka(tree: dict[str, Any], where: str) -> None:
    """A wrong chroot is a silent capture of nothing: say so (not fatal, as capture may start
    before Kafka has written its tree)."""
    if "/brokers/ids" not in tree:
        log.warning(
            "no Kafka tree here: nothing at /brokers/ids; is the chroot right?",
            zookeeper=where,
            known_znodes=len(tree),
        )
