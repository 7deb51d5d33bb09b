"""`zkcdc capture`: one runner for every source. It wins the election (if the source runs
under one), restores what was given out, starts the source's snapshot, then turns: each turn
takes the source's records (plus a heartbeat when due), writes them as one event-log block and
hands them to Kafka, until SIGTERM/SIGINT.

The loop is single-threaded: the sources' own threads (kazoo's) only read and hand results
over, so the tracker sees one ordered stream.

An active that loses the election steps down (what it handed to Kafka and not yet sent is
purged: the event log keeps it), campaigns again and, elected, goes on from the topic or its own
state, whichever is further on: it exits only when told to or on an error a restart would not
cure."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from zkcdc.capture.collector_pacing import CollectorPacing
from zkcdc.capture.delivery.record_outlet import RecordOutlet, prepare_topic
from zkcdc.capture.delivery.topic_follower import TopicFollower
from zkcdc.capture.delivery.transactions import Fenced, TransactionLost, TransactionsNotReady
from zkcdc.capture.encoding.avro_codec import change_decoder
from zkcdc.capture.kraft.source import KraftSource
from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.source import Source
from zkcdc.capture.tracker import TrackerState
from zkcdc.capture.txnlog.source import TxnlogSource
from zkcdc.capture.watch.election import Election, LostElection
from zkcdc.capture.watch.source import WatchSource
from zkcdc.capture.watch.zookeeper import ZooKeeperUnavailable
from zkcdc.ground import logs, systemd_notify
from zkcdc.ground.backoff import retried
from zkcdc.ground.kafka_connection import PREFETCH_KBYTES_PER_PARTITION, KafkaUnreachable
from zkcdc.ground.metrics_server import serve

log = logs.get("zkcdc.capture")

_IDLE_S = 0.05  # longest wait for a change: how soon a stop or a due heartbeat is noticed
_SLOW_TURN_S = 0.1  # a turn longer than this is logged: the records of it wait that long


class CaptureRunner:
    def __init__(
        self,
        settings: CaptureSettings,
        source: Source | None = None,
        *,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        new_source: Callable[[], Source] | None = None,
    ) -> None:
        """`new_source`: makes each later term's source (a new one reads afresh)."""
        self.settings = settings
        self._now = now
        self._sleep = sleep
        self.metrics = CaptureMetrics()
        # A standby (which may never publish) follows the topic with this prefetch: said from
        # the start, whatever the role.
        self.metrics.queue_bound.labels("standby_prefetch_kbytes_per_partition").set(
            PREFETCH_KBYTES_PER_PARTITION
        )
        self._new_source: Callable[[], Source] = new_source or (
            lambda: source_for(settings, self.metrics, self.now_ms, sleep)
        )
        self.source = source or self._new_source()
        self._opened = False  # self.source is open (run() opens the first)
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._last_turn = time.monotonic()
        self._active = False
        self._election: Election | None = None
        self._topic_follower: TopicFollower | None = None  # a non-elected source's, kept
        self._outlet: RecordOutlet | None = None  # the next term's, made when it fences
        self._stepping_down = threading.Event()  # the term is lost: end it, campaign again
        self._producer_lost = False  # ... by its producer alone: the lock may still be held
        self._step_down_reason = ""

    def now_ms(self) -> int:
        return int(self._now() * 1000)

    def _lost_term(self, reason: str) -> None:
        """The election's thread: this daemon is no longer the active one."""
        self._step_down_reason = reason
        self._stepping_down.set()
        self.source.wake()

    def stop(self, *_: Any) -> None:
        if not self._stop.is_set():
            systemd_notify.notify("STOPPING=1")
        self._stop.set()
        self.source.wake()

    def install_signal_handlers(self) -> None:
        # kazoo's threads answer watches; a short GIL switch interval keeps the main loop's
        # encoding from delaying them (the default 5 ms shows up directly as capture lag).
        sys.setswitchinterval(0.0001)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        # Started here, not in the handler: a handler starting a thread can deadlock on
        # threading's own locks when it interrupts the main thread's Thread.start.
        threading.Thread(target=self._watchdog, name="shutdown-watchdog", daemon=True).start()
        systemd_notify.keep_alive(lambda: self._alive()[0], self._stop)

    def _watchdog(self, limit_s: float = 25.0) -> None:
        """A stop that does not finish in time is a bug: show every thread's stack, then exit
        non-zero rather than hang (the event log already holds every record)."""
        self._stop.wait()
        if self._finished.wait(limit_s):
            return
        log.error("shutdown did not finish; thread stacks follow", limit_s=limit_s)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(1)

    def turned(self) -> None:
        """The main loop went round: what systemd's watchdog (and /healthz) take as alive."""
        self._last_turn = time.monotonic()

    def _alive(self) -> tuple[bool, str]:
        """Liveness (systemd's watchdog, `/livez`): the loop goes round, whatever ZooKeeper
        does; a daemon waiting out an outage is alive, not one to restart."""
        stalled = time.monotonic() - self._last_turn
        if stalled > self.settings.session_timeout_s:
            return False, f"main loop stalled for {stalled:.0f} s"
        return True, "active" if self._active else "standby"

    def _health(self) -> tuple[bool, str]:
        """Readiness (`/healthz`): alive and connected (the source's session when active, the
        election's while standby)."""
        alive, reason = self._alive()
        if not alive:
            return alive, reason
        election = self._election
        if not self._active and election is not None:
            if not election.connected:
                return False, "standby: ZooKeeper not connected (campaigning)"
        elif not self.source.connected:
            return False, f"{self.source.name}: not connected"
        return True, reason

    # -- start-up -----------------------------------------------------------------------
    def run(self) -> None:
        server = None
        try:
            cluster = self.source.open()
            self._opened = True
            server = self._prepare_outputs()
            while True:
                followed = self._elected(cluster)
                if followed is None:
                    return  # stopped while standby
                self._capture(cluster, followed)
                if not self._stepping_down.is_set() or self._stop.is_set():
                    return
                self._stepped_down()
        finally:
            if self._outlet is not None:
                self._outlet.discard()  # stopped between fencing and capturing
            self.source.close()
            if self._election is not None:
                self._election.close()
            if self._topic_follower is not None:
                self._topic_follower.close()
            if server is not None:
                server.shutdown()
            self._finished.set()

    def _stepped_down(self) -> None:
        """Between terms: the source closed (a new one reads the tree afresh once elected),
        and the election let go, so the next campaign starts clean. Without an election (a
        log's source) the term ended with its producer: a new one is made at once, as by a
        restart; so is it for an elected daemon that still holds its lock."""
        self._active = False
        self.metrics.active.set(0)
        producer_lost, self._producer_lost = self._producer_lost, False
        if self._election is not None and producer_lost and self._election.holds():
            log.warning("the producer is lost", reason=self._step_down_reason,
                        then="capturing again with a new one, still active")  # fmt: skip
        elif self._election is not None:
            self.metrics.elections.labels("standby").inc()
            systemd_notify.notify("STATUS=standby, campaigning again")
            log.warning("stepped down", reason=self._step_down_reason, then="campaigning again")
            self._election.step_down()
        else:
            log.warning("the producer is lost", reason=self._step_down_reason,
                        then="capturing again with a new one")  # fmt: skip
        self.source.close()
        self.source = self._new_source()
        self._opened = False  # opened when the next term starts
        self._stepping_down.clear()

    def _prepare_outputs(self) -> ThreadingHTTPServer | None:
        """Kafka reachable and its topic there (if publishing); the metrics port served."""
        s = self.settings
        if s.kafka() is not None:
            # The topic's creation reads the cluster's metadata first, so one attempt covers
            # a Kafka unreachable and one too slow to make the topic (TLS, a loaded machine):
            # under --wait both are asked again.
            retried(
                lambda: self._topic_prepared(s),
                KafkaUnreachable,
                s.connect_tries(),
                self._sleep,
                interrupt=self._stop.is_set,
            )
        if s.metrics_port is None:
            return None
        return serve(
            self.metrics.registry, s.metrics_host, s.metrics_port, self._health,
            s.metrics_web_config, alive=self._alive,
        )  # fmt: skip

    def _topic_prepared(self, s: CaptureSettings) -> None:
        try:
            prepare_topic(s)
        except KafkaUnreachable as exc:
            if s.connect_tries() is None:
                log.warning("the changes topic is not there yet", reason=str(exc),
                            then="asking again")  # fmt: skip
            raise

    def _elected(self, cluster: str) -> TrackerState | None:
        """The state to go on from: the topic's (as a standby followed it) once elected, an
        empty one for a source without election. None: stopped while standby."""
        if not self.source.elected:
            if not self._open_source() or not self._fence(cluster):
                return None
            followed: TrackerState | None = (
                self._followed_topic(cluster) if self.settings.take_over else TrackerState(cluster)
            )
        else:
            if self._election is None:
                self._election = Election(
                    self.settings, self._stop, self._lost_term, self.turned, self._sleep
                )
            followed = self._election.win(cluster, lambda: self._fence(cluster))
            if followed is not None and not self._open_source():
                followed = None  # stopped while ZooKeeper was away
        if followed is not None:
            self._active = True
            self.metrics.active.set(1)
            self.metrics.elections.labels("active").inc()
        return followed

    def _open_source(self) -> bool:
        """A later term's source, opened once elected (ZooKeeper answered the election, so
        it is back): tried until it connects or the daemon is stopped."""
        if self._opened:
            return True
        try:
            retried(self.source.open, ZooKeeperUnavailable, None, self._pause, self._stop.is_set)
        except ZooKeeperUnavailable:
            return False  # stopped
        self._opened = True
        election = self._election
        if election is not None and election.went_back and isinstance(self.source, WatchSource):
            self.source.history_went_back(election.went_back)
            election.went_back = None
        return True

    def _fence(self, cluster: str) -> bool:
        """The term's outlet, made before the topic is read: with transactions its producer
        first fences every earlier one of the stream (their open transactions aborted, their
        commits finished), so the topic, once read, holds all it ever will of theirs. False:
        stopped while Kafka did not answer."""

        def make() -> None:
            try:
                self._outlet = RecordOutlet(self.settings, cluster, self.metrics, self._now)
            except TransactionsNotReady as exc:
                # Said each time: a term can wait minutes here while the brokers come back.
                log.warning("the term's producer is not ready yet: trying again", reason=str(exc))
                raise

        try:
            retried(make, TransactionsNotReady, None, self._pause, self._stop.is_set)
        except TransactionsNotReady:
            return False
        return True

    def _pause(self, seconds: float) -> None:
        """Backoff's waits: alive (the loop counts as turning) and ended by a stop."""
        until = time.monotonic() + seconds
        # not a wait: a pause of a set length that keeps the loop counted alive and ends at a stop
        while not self._stop.is_set() and (left := until - time.monotonic()) > 0:
            self.turned()
            self._stop.wait(min(left, 0.5))

    def _followed_topic(self, cluster: str) -> TrackerState:
        """The stream's last state on the topic: where another capture of `cluster` got to."""
        s = self.settings
        kafka = s.kafka()
        assert kafka is not None
        if self._topic_follower is None:  # one for the daemon's life, as an election's
            self._topic_follower = TopicFollower(
                kafka, s.topic, cluster, change_decoder(s.schema_registry)
            )
        follower = self._topic_follower
        try:
            follower.catch_up(s.connect_timeout_s, self.turned)
            return follower.state()
        finally:
            follower.rest()

    # -- capture ------------------------------------------------------------------------
    def _capture(self, cluster: str, followed: TrackerState) -> None:
        s, source = self.settings, self.source
        outlet, self._outlet = self._outlet, None
        assert outlet is not None, "fenced first (_elected)"
        state = outlet.load(followed)
        outlet.open()
        failing = True
        lost = False
        try:
            source.start(state)
            log.info(
                "capturing",
                cluster=cluster,
                source=source.name,
                **{"zookeeper" if source.elected else "reading": source.where},
                **source.position,
                seq=state.seq,
                known_znodes=len(state.tree),
                topic=s.topic if outlet.publisher else None,
                event_log=str(s.event_log_path(cluster)),
            )
            with CollectorPacing() as collector:
                self._loop(state, outlet, collector)
            failing = False
        except (LostElection, Fenced, TransactionLost) as exc:
            if self._election is None and not isinstance(exc, TransactionLost):
                raise  # fenced: another daemon has the stream, and no election to go back to
            failing = False
            # Only the producer is lost: an elected daemon keeps its lock, so its event log
            # (what Kafka lacks, a whole outage's worth) goes out, not a standby's re-walk.
            self._producer_lost = isinstance(exc, TransactionLost)
            self._lost_term(str(exc))
        finally:
            lost = self._stepping_down.is_set() and not self._stop.is_set()
            outlet.close(state, failing, give_up=lost)

    def _loop(self, state: TrackerState, outlet: RecordOutlet, collector: CollectorPacing) -> None:
        s, source = self.settings, self.source
        next_heartbeat = self._now() + s.heartbeat_s
        last_out = time.monotonic()
        first_sync = True
        election = self._election
        # not a wait: the capture loop; next_heartbeat is when a heartbeat falls due
        while not self._stop.is_set() and not self._stepping_down.is_set():
            self.turned()
            if election is not None and election.suspended:
                # The session may have expired and a standby be on: nothing goes out until
                # kazoo says CONNECTED (it survived) or LOST (step down).
                election.probe_if_refused()
                self._stop.wait(_IDLE_S)
                continue
            started = time.perf_counter()
            wait = max(0.0, min(next_heartbeat - self._now(), _IDLE_S))
            if outlet.in_flight and source.quick_acks:
                wait = min(wait, s.poll_interval_s)  # back soon for their acks
            due = outlet.due_in()
            if due is not None:
                wait = min(wait, due)  # a transaction's commit falls due, or is under way
            turn = source.poll(wait)
            records = turn.records
            if turn.synced:
                self._synced(state, first_sync)
                first_sync = False
                collector.settle()  # the tree just read: long-lived, walked once
            now = self._now()
            if turn.caught_up and heartbeat_due(now, next_heartbeat, s.heartbeat_s, bool(records)):
                # One to each partition of the changes topic: the alert job waits on each
                # partition's newest seq before it passes a missing one (seq_order.py).
                records += [source.heartbeat() for _ in range(outlet.heartbeat_round)]
                next_heartbeat = now + s.heartbeat_s
            if records:
                if self._election is not None and time.monotonic() - last_out > (
                    s.session_timeout_s / 3
                ):
                    self._election.confirm()
                # Taken before giving out: a stall inside give_out (an fsync under load) must
                # make the next turn ask again, not count as time known to be active.
                last_out = time.monotonic()
                outlet.give_out(records)
            outlet.tick(state)
            collector.tick()
            took = time.perf_counter() - started - turn.waited_s
            if took > _SLOW_TURN_S and records:
                log.warning("slow turn", ms=round(1000 * took), records=len(records))

    def _synced(self, state: TrackerState, first: bool) -> None:
        status = "in sync" if self.source.elected else "following the source"
        systemd_notify.notify(f"READY=1\nSTATUS=active, {status}")
        log.info("in sync", seq=state.seq, known_znodes=len(state.tree), **self.source.position)
        if first:
            warn_if_not_kafka(state.tree, self.source.where)


def heartbeat_due(now: float, due_at: float, interval_s: float, giving_out: bool) -> bool:
    """Whether a round of heartbeats goes out this turn: once it is due, or, when records go
    out now anyway, up to half an interval early. A reader then takes the round with those
    records, not on its own a moment later: the alert job runs a micro-batch for every read
    that brings something, each ~0.3 s of fixed cost, and a change that comes while the round's
    micro-batch runs waits for it (BENCHMARKS.md, B9). Rounds stay at most an interval apart."""
    return now >= due_at or (giving_out and now >= due_at - interval_s / 2)


def source_for(
    settings: CaptureSettings,
    metrics: CaptureMetrics,
    now_ms: Callable[[], int],
    sleep: Callable[[float], None],
) -> Source:
    if settings.source == "txnlog":
        return TxnlogSource(settings, now_ms)
    if settings.source == "kraft":
        return KraftSource(settings, now_ms, sleep)
    return WatchSource(settings, metrics, now_ms, sleep)


def warn_if_not_kafka(tree: dict[str, Any], where: str) -> None:
    """A wrong chroot is a silent capture of nothing: say so (not fatal, as capture may start
    before Kafka has written its tree)."""
    if "/brokers/ids" not in tree:
        log.warning(
            "no Kafka tree here: nothing at /brokers/ids; is the chroot right?",
            zookeeper=where,
            known_znodes=len(tree),
        )
