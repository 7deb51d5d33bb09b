"""Where a capture daemon's records go, whatever their source (watches or ZooKeeper's
transaction log): the event log first (what is logged is never lost), then Kafka; and the state
a restart continues from (the checkpointed tree, the seq Kafka acknowledged)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zkcdc.capture import failpoints
from zkcdc.capture.delivery.checkpoint import CheckpointStore
from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.capture.delivery.event_log import Damage, EventLogWriter
from zkcdc.capture.delivery.kafka_feed import KafkaFeed
from zkcdc.capture.delivery.log_tail import LogTail
from zkcdc.capture.delivery.publisher import Publisher, producer_config
from zkcdc.capture.delivery.topic_guard import (
    TopicGuard,
    settled_count,
    starting_count,
)
from zkcdc.capture.delivery.topic_holdings import delivered_seqs, topic_max_message_bytes
from zkcdc.capture.encoding.avro_codec import SingleObjectCodec, registry_serializer
from zkcdc.capture.encoding.record_encoding import encode_records
from zkcdc.capture.errors import CaptureError
from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.oversize import MESSAGE_OVERHEAD
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.tracker import TrackerState
from zkcdc.ground import logs
from zkcdc.ground.change_types import Op
from zkcdc.ground.kafka_connection import KafkaConnection

log = logs.get("zkcdc.capture")

# The longest an unchanged tree goes without being saved again (RecordOutlet._tree_unchanged).
UNCHANGED_TREE_MAX_S = 3600.0


class RecordOutlet:
    def __init__(
        self,
        settings: CaptureSettings,
        cluster: str,
        metrics: CaptureMetrics,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        self.metrics = metrics
        self._now = now
        self.store = CheckpointStore(
            settings.state_path(cluster), settings.event_log_path(cluster), cluster
        )
        self._single_object_header: bytes | None = None
        kafka = settings.kafka()
        self.publisher = None if kafka is None else self._publisher(kafka)
        self.topic_guard = None if self.publisher is None else self._topic_guard()
        if self.publisher is not None and self.topic_guard is not None:
            self.publisher.partitions = self.topic_guard.partitions
        self.feed = (
            None
            if self.publisher is None
            else KafkaFeed(
                self.publisher,
                lambda seq: LogTail(settings.event_log_path(cluster), cluster, seq, _log_damage),
            )
        )
        self._writer: EventLogWriter | None = None
        self._next_delivered = now() + 1.0
        self._next_checkpoint = now() + settings.checkpoint_s
        # The seq of the last record the event log holds for good. The tracker's state runs
        # ahead of it within a turn; a checkpoint of the tree is taken only when they agree, so
        # what a restart continues from never claims a record the log does not have.
        self.logged_seq = 0
        # The seq of the last record that changed the tree (a heartbeat changes none).
        self._changed_seq = 0

    def load(self, followed: TrackerState | None = None) -> TrackerState:
        """The state as of the last record given out: this host's checkpoint and event log, or
        what a standby followed on the topic when that is further on."""
        state = self.store.load(on_damage=_log_damage)
        if followed is not None and followed.seq > state.seq:
            log.info("taking over from the topic", seq=followed.seq, local_seq=state.seq)
            state = followed
        self.logged_seq = state.seq
        return state

    def open(self) -> None:
        """Opens the log; what an earlier run logged but Kafka may not hold goes out first."""
        s = self.settings
        if self.feed is not None:
            self._resume_backlog(self.feed)
        self._writer = EventLogWriter(
            s.event_log_path(self.cluster),
            self.cluster,
            max_bytes=s.log_rotate_bytes,
            max_age_s=s.log_rotate_s,
            now=self._now,
            fsync=s.event_log_fsync,
        )

    def give_out(self, records: list[ChangeRecord]) -> None:
        writer = self._writer
        assert writer is not None, "open() first"
        values, bodies = encode_records(writer.encode, records)  # once, for log and Kafka
        writer.append(values, bodies)  # the log first: what is logged is never lost
        self.logged_seq = records[-1].seq
        for record in reversed(records):
            if record.op != Op.HEARTBEAT:
                self._changed_seq = record.seq
                break
        if self.feed is not None:
            failpoints.hit("kafka.produce")
            if self._single_object_header is None:
                self.feed.give(values, None)  # the registry's own framing
            else:
                header = self._single_object_header
                self.feed.give(values, [header + body for body in bodies])
        self.metrics.given_out(records)

    @property
    def heartbeat_round(self) -> int:
        """How many heartbeats make one round: one for each partition of the changes topic
        (`publisher.heartbeat_partition`), one without Kafka."""
        return max(1, self.publisher.partitions) if self.publisher is not None else 1

    @property
    def in_flight(self) -> bool:
        """Records handed to Kafka and not yet acknowledged, or waiting in the log for it."""
        return self.feed is not None and (
            self.feed.publisher.backlog > 0 or self.feed.waiting_in_log
        )

    def due_in(self) -> float | None:
        """Seconds until the publisher wants a turn of the loop (a commit falling due, or one
        in flight to look at); None: not before more records come."""
        return None if self.publisher is None else self.publisher.due_in()

    def tick(self, state: TrackerState) -> None:
        """Each turn of the daemon's loop: delivery reports, and now and then the checkpoint."""
        now = self._now()
        if self.publisher is not None:
            assert self.topic_guard is not None
            try:
                self.publisher.poll(0)
                self.publisher.check_stalled(self.topic_guard.answering_for())
            except DeliveryError:
                self.topic_guard.check(force=True)  # says what happened to the topic, if so
                raise
            self.topic_guard.check()
            if self.feed is not None and self.feed.waiting_in_log:
                self.feed.refill(self.logged_seq)
            self.metrics.backlog.set(self.publisher.backlog)
            if now >= self._next_delivered:
                self.store.save_delivered(self.publisher.acked_through, background=True)
                self._next_delivered = now + 1.0
        if now >= self._next_checkpoint and state.seq == self.logged_seq:
            every_s = self.settings.checkpoint_s
            if self._tree_unchanged(state, now):
                self._next_checkpoint = now + every_s
                return
            self.store.save_tree(state.seq, dict(state.tree), background=True, zxid=state.zxid,
                                 mode=state.mode, at=now)  # fmt: skip
            self._next_checkpoint = now + self.store.next_tree_in(every_s)

    def _tree_unchanged(self, state: TrackerState, now: float) -> bool:
        """Whether the tree last saved is the tree now, only heartbeats given out since: it is
        not written again (an idle capture of a large cluster wrote the same tree over and
        over, ~25 s of a core at 2,000,000 znodes each time), except once every
        UNCHANGED_TREE_MAX_S, so that a restart replays at most that much of the log.

        The position (`zxid`) may have moved: a KRaft log moves with every NoOp the controller
        appends (twice a second), a transaction log with any transaction that changes no znode
        capture keeps (a client's session opened or closed, say). Each heartbeat carries the
        position it was given at, and a restart takes it from the last one in the log
        (`tracker.apply_records`); from there it reads at most the few transactions after that
        heartbeat again, which change no znode either."""
        saved = self.store.saved_tree  # a write that failed leaves the one before
        return (
            saved is not None
            and self._changed_seq <= saved.seq
            and state.mode == saved.mode
            and now - saved.at < UNCHANGED_TREE_MAX_S
        )

    def discard(self) -> None:
        """Never opened (stopped first): its thread ends, nothing goes out."""
        if self.topic_guard is not None:
            self.topic_guard.close()
        if self.publisher is not None:
            self.publisher.give_up()

    def close(self, state: TrackerState, failing: bool = False, give_up: bool = False) -> None:
        """Flushes what it can and saves the state for the next run. `failing`: the run is
        ending on an error, which must not be hidden: problems here are logged, not raised.
        Otherwise the first problem is raised (CheckpointError) after everything was tried.
        `give_up`: the term was lost; what Kafka has not taken is not sent (another daemon may
        be giving out these seqs now), only kept in the event log."""
        problems: list[CaptureError] = []
        if self.topic_guard is not None:
            self.topic_guard.close()
        if self._writer is not None:
            self._writer.close()
        if self.publisher is not None:
            if give_up:
                unsent = self.publisher.give_up()
                if unsent:
                    log.warning("stepping down: records not sent to Kafka (the event log keeps "
                                "them)", not_sent=unsent)  # fmt: skip
            else:
                try:
                    if not self.publisher.flush(10.0):
                        log.warning(
                            "stopping with records not yet on Kafka",
                            backlog=self.publisher.backlog,
                        )
                except CaptureError as exc:
                    problems.append(exc)
            self.store.wait()
            try:
                self.store.save_delivered(self.publisher.acked_through)
            except CaptureError as exc:
                problems.append(exc)
        if state.seq == self.logged_seq:
            self.store.wait()  # a tree still being written: `saved_tree` says once it is
            # An unchanged tree stands: writing a large one again would hold the stop up.
            if not self._tree_unchanged(state, self._now()):
                try:
                    self.store.save_tree(state.seq, dict(state.tree), background=False,
                                         zxid=state.zxid, mode=state.mode)  # fmt: skip
                except CaptureError as exc:
                    problems.append(exc)
        else:
            # Records were made that the log does not hold (its write failed, or the turn
            # did): the tree of the last checkpoint plus the log's tail is the true state.
            log.warning(
                "the known tree is ahead of the event log: not saved; the next run continues "
                "from the last logged record",
                logged_seq=self.logged_seq,
                seq=state.seq,
            )
        for problem in problems:
            log.error("while stopping", reason=str(problem))
        log.info("stopped", seq=self.logged_seq)
        if problems and not failing:
            raise problems[0]

    # -- Kafka ----------------------------------------------------------------------------
    def _publisher(self, kafka: KafkaConnection) -> Publisher:
        s = self.settings
        codec = SingleObjectCodec()
        serialize = (
            registry_serializer(s.schema_registry, codec.schema, s.topic)
            if s.schema_registry
            else codec.encode
        )
        # Single-object values are the log's record bytes behind this header: encoded once.
        self._single_object_header = None if s.schema_registry else codec.header
        takes = topic_max_message_bytes(kafka, s.topic, s.connect_timeout_s)
        limit = min(s.max_record_bytes, takes - MESSAGE_OVERHEAD if takes else s.max_record_bytes)
        if limit < s.max_record_bytes:
            log.warning(
                "the changes topic takes smaller records than a znode may need: larger ones go "
                "out without their images' bytes (header zkcdc.omitted); the event log has them",
                topic=s.topic,
                max_message_bytes=takes,
                wanted=s.max_record_bytes + MESSAGE_OVERHEAD,
            )
        publisher = Publisher(
            kafka, s.topic, serialize, max_value_bytes=limit,
            transactional_id=s.transactional_id_for(self.cluster),
            start_timeout_s=max(s.connect_timeout_s, 10.0),
            commit_interval_s=s.commit_interval_ms / 1000, commit_records=s.commit_records,
        )  # fmt: skip

        # Not a closure over the outlet: outlet -> publisher -> on_ack -> outlet would be a
        # cycle, and a lost term's producer would wait for the cycle collector to be let go.
        now, lag = self._now, self.metrics.lag

        def on_ack(record: dict[str, Any]) -> None:
            if record["op"] in ("CREATE", "UPDATE", "DELETE"):
                lag.observe(max(0, int(now() * 1000) - record["ts_ms"]) / 1000)

        publisher.on_ack = on_ack
        bounds = self.metrics.queue_bound
        bounds.labels("publisher_waiting_records").set(publisher.max_waiting)
        bounds.labels("producer_kbytes").set(producer_config(limit)["queue.buffering.max.kbytes"])
        return publisher

    def _topic_guard(self) -> TopicGuard:
        s, publisher = self.settings, self.publisher
        assert publisher is not None
        client = publisher.client
        count = settled_count(client, s.topic, s.connect_timeout_s)
        count = starting_count(s.state_path(self.cluster), s.topic, count, s.accept_partition_count)
        return TopicGuard(client, s.topic, count, s.connect_timeout_s)

    def _resume_backlog(self, feed: KafkaFeed) -> None:
        """Records logged by an earlier run but maybe never acknowledged go out first, read
        from the log as Kafka takes them (never all in memory), those the topic already
        holds left out."""
        s = self.settings
        kafka = s.kafka()
        assert kafka is not None
        delivered = self.store.delivered()
        first = next(iter(self.store.records_after(delivered, _log_damage)), None)
        # What the last run had on Kafka (all of it, if nothing is logged after it): the saved
        # checkpoint must never go back to 0 before this run's first ack.
        publisher = feed.publisher
        publisher.acked_through = max(
            publisher.acked_through, delivered if first is not None else self.logged_seq
        )
        if first is None:
            return
        present = delivered_seqs(
            kafka,
            s.topic,
            self.cluster,
            first["captured_ms"] - 60_000,
            s.connect_timeout_s,
        )
        log.info("publishing backlog", from_seq=first["seq"], already_on_kafka=len(present))
        feed.resume(delivered, present)
        feed.refill(self.logged_seq)


def _log_damage(damage: Damage) -> None:
    log.warning(
        "event log damaged", file=str(damage.file), block=damage.block, reason=damage.reason
    )


def prepare_topic(s: CaptureSettings) -> None:
    """The changes topic, created if missing with room for the largest record a znode can
    make (`capture.oversize`)."""
    kafka = s.kafka()
    assert kafka is not None
    room = {"max.message.bytes": str(s.max_record_bytes + MESSAGE_OVERHEAD)}
    kafka.ensure_topic(s.topic, s.topic_partitions, s.connect_timeout_s, room)
