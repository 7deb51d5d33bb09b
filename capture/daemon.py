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
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout

from capture import zookeeper
from capture.avro_codec import SingleObjectCodec, registry_serializer
from capture.checkpoint import CheckpointStore
from capture.errors import CaptureError
from capture.event_log import EventLogWriter
from capture.metrics import CaptureMetrics, serve
from capture.publisher import Publisher, check_reachable, delivered_seqs, ensure_topic
from capture.records import ChangeRecord
from capture.settings import CaptureSettings
from capture.topic_follower import TopicFollower
from capture.tracker import Tracker, TrackerState
from capture.tree_reader import TreeReader
from zkcdc import logs

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
        self._finished = threading.Event()
        self._inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.metrics = CaptureMetrics()
        self._connected = False
        self._active = False
        self._lost_election = False
        self.zk_client: KazooClient | None = None
        self._single_object_header: bytes | None = None

    def now_ms(self) -> int:
        return int(self._now() * 1000)

    def stop(self, *_: Any) -> None:
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

    # -- start-up -----------------------------------------------------------------------
    def run(self) -> None:
        s = self.settings
        retries = 1_000_000 if s.wait else 0
        client = zookeeper.connect(
            s.zookeeper,
            s.session_timeout_s,
            s.connect_timeout_s,
            s.zookeeper_auth,
            retries,
            self._sleep,
        )
        self.zk_client = client
        election_client: KazooClient | None = None
        server = None
        try:
            cluster = s.cluster or zookeeper.cluster_id(client, s.zookeeper)
            kafka = s.kafka_extra()
            if s.bootstrap_servers:
                self._check_kafka(s.bootstrap_servers, kafka, retries)
                ensure_topic(
                    s.bootstrap_servers, kafka, s.topic, s.topic_partitions, s.connect_timeout_s
                )
            if s.metrics_port is not None:
                server = serve(self.metrics, s.metrics_host, s.metrics_port, self._health)
            hosts, _ = zookeeper.split_hosts(s.zookeeper)
            election_client = zookeeper.connect(
                hosts,
                s.session_timeout_s,
                s.connect_timeout_s,
                s.zookeeper_auth,
                retries,
                self._sleep,
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

    def _check_kafka(self, bootstrap: str, extra: dict[str, str], retries: int) -> None:
        delay = 1.0
        for attempt in range(retries + 1):
            try:
                check_reachable(bootstrap, extra, self.settings.connect_timeout_s)
                return
            except CaptureError:
                if attempt == retries or self._stop.is_set():
                    raise
            self._sleep(delay)
            delay = min(delay * 2, 30.0)

    def _health(self) -> tuple[bool, str]:
        if not self._connected:
            return False, "zookeeper: not connected"
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
        if s.bootstrap_servers:
            follower = TopicFollower(
                s.bootstrap_servers, s.kafka_extra(), s.topic, cluster, SingleObjectCodec()
            )
        announced = False
        try:
            while not self._stop.is_set():
                try:
                    if lock.acquire(timeout=0.5):
                        break
                except LockTimeout:
                    pass
                if not announced:
                    log.info("standby", cluster=cluster, election=f"{s.ha_path}/{cluster}")
                    announced = True
                if follower is not None:
                    follower.poll(0.5)
            else:
                return None
            self._active = True
            self.metrics.active.set(1)
            if follower is None:
                return TrackerState(cluster=cluster)
            follower.catch_up(s.connect_timeout_s)
            return follower.state()
        finally:
            if follower is not None:
                follower.close()

    # -- capture ------------------------------------------------------------------------
    def _capture(self, client: KazooClient, cluster: str, followed: TrackerState) -> None:
        s = self.settings
        store = CheckpointStore(s.state_path(cluster), s.event_log_path(cluster), cluster)
        state = store.load(
            on_damage=lambda d: log.warning(
                "event log damaged", file=str(d.file), block=d.block, reason=d.reason
            )
        )
        if followed.seq > state.seq:
            log.info("taking over from the topic", seq=followed.seq, local_seq=state.seq)
            state = followed
        publisher = self._publisher(cluster) if s.bootstrap_servers else None
        if publisher is not None:
            self._publish_backlog(store, publisher, cluster)
        writer = EventLogWriter(
            s.event_log_path(cluster),
            cluster,
            max_bytes=s.log_rotate_bytes,
            max_age_s=s.log_rotate_s,
            now=self._now,
        )
        tracker = Tracker(state, self.now_ms)
        tracker.session_id = client.client_id[0] if client.client_id else None
        log.info(
            "capturing",
            cluster=cluster,
            zookeeper=s.zookeeper,
            seq=state.seq,
            known_znodes=len(state.tree),
            topic=s.topic if publisher else None,
            event_log=str(s.event_log_path(cluster)),
        )
        excluded = _excluded(s.zookeeper, s.ha_path)
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
        try:
            self._loop(client, tracker, reader, generation, writer, publisher, store)
        finally:
            reader.close()
            client.remove_listener(on_state)
            self._shutdown(tracker, writer, publisher, store)

    def _loop(
        self,
        client: KazooClient,
        tracker: Tracker,
        reader: TreeReader,
        generation: int,
        writer: EventLogWriter,
        publisher: Publisher | None,
        store: CheckpointStore,
    ) -> None:
        s = self.settings
        next_heartbeat = self._now() + s.heartbeat_s
        next_delivered = self._now() + 1.0
        next_checkpoint = self._now() + s.checkpoint_s
        while not self._stop.is_set():
            records: list[ChangeRecord] = []
            timeout = max(0.0, min(next_heartbeat - self._now(), 0.05))
            for item in _drain(self._inbox, timeout):
                kind = item[0]
                if kind == "read":
                    records.extend(tracker.read(item[1], item[2], item[3]))
                elif kind == "synced" and item[1] == generation:
                    records.extend(tracker.end_sync())
                    log.info(
                        "in sync",
                        seq=tracker.state.seq,
                        known_znodes=len(tracker.state.tree),
                        watches="recursive" if reader.recursive else "one-shot",
                    )
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
                self._give_out(records, writer, publisher)
            if publisher is not None:
                publisher.poll(0)
                self.metrics.backlog.set(publisher.backlog)
                if now >= next_delivered:
                    store.save_delivered(publisher.acked_through)
                    next_delivered = now + 1.0
            if now >= next_checkpoint:
                store.save_tree(tracker.state.seq, dict(tracker.state.tree), background=True)
                next_checkpoint = now + s.checkpoint_s

    def _give_out(
        self, records: list[ChangeRecord], writer: EventLogWriter, publisher: Publisher | None
    ) -> None:
        values = [r.to_avro() for r in records]
        bodies = [writer.encode(v) for v in values]  # once, for the log and for Kafka
        writer.append(values, bodies)  # the log first: what is logged is never lost
        if publisher is not None:
            if self._single_object_header is None:
                publisher.publish(values)  # the registry's own framing
            else:
                header = self._single_object_header
                publisher.publish(values, [header + body for body in bodies])
        for record in records:
            self.metrics.records.labels(record.op.value).inc()
            if record.versions_skipped:
                self.metrics.versions_skipped.inc(record.versions_skipped)
            for event in record.events:
                self.metrics.events.labels(event.type.value).inc()
        self.metrics.seq.set(records[-1].seq)

    def _shutdown(
        self,
        tracker: Tracker,
        writer: EventLogWriter,
        publisher: Publisher | None,
        store: CheckpointStore,
    ) -> None:
        writer.close()
        if publisher is not None:
            if not publisher.flush(10.0):
                log.warning("stopping with records not yet on Kafka", backlog=publisher.backlog)
            store.save_delivered(publisher.acked_through)
        store.save_tree(tracker.state.seq, dict(tracker.state.tree), background=False)
        log.info("stopped", seq=tracker.state.seq)

    # -- Kafka ----------------------------------------------------------------------------
    def _publisher(self, cluster: str) -> Publisher:
        s = self.settings
        assert s.bootstrap_servers is not None
        codec = SingleObjectCodec()
        serialize = (
            registry_serializer(s.schema_registry, codec.schema, s.topic)
            if s.schema_registry
            else codec.encode
        )
        # Single-object values are the log's record bytes behind this header: encoded once.
        self._single_object_header = None if s.schema_registry else codec.header
        publisher = Publisher(s.bootstrap_servers, s.topic, serialize, s.kafka_extra())

        def on_ack(record: dict[str, Any]) -> None:
            if record["op"] in ("CREATE", "UPDATE", "DELETE"):
                self.metrics.lag.observe(max(0, self.now_ms() - record["ts_ms"]) / 1000)

        publisher.on_ack = on_ack
        return publisher

    def _publish_backlog(self, store: CheckpointStore, publisher: Publisher, cluster: str) -> None:
        """Records logged by an earlier run but maybe never acknowledged: publish those the
        topic does not already hold, in log order."""
        s = self.settings
        assert s.bootstrap_servers is not None
        backlog = list(store.records_after(store.delivered()))
        if not backlog:
            return
        since = min(r["captured_ms"] for r in backlog) - 60_000
        present = delivered_seqs(
            s.bootstrap_servers, s.kafka_extra(), s.topic, cluster, since, s.connect_timeout_s
        )
        missing = [r for r in backlog if r["seq"] not in present]
        log.info(
            "publishing backlog", logged=len(backlog), already_on_kafka=len(backlog) - len(missing)
        )
        publisher.publish(missing)
        publisher.poll(0)


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


def _excluded(connect_string: str, ha_path: str) -> Callable[[str], bool]:
    """With Kafka at the ZooKeeper root, zkcdc's own election znodes are not Kafka's tree."""
    _, chroot = zookeeper.split_hosts(connect_string)
    if chroot:
        return lambda path: False
    return lambda path: path == ha_path or path.startswith(ha_path + "/")
