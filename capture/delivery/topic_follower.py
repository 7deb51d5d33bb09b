"""A standby's view of what the active daemon gave out: the changes topic, read from the start.

Keeps, per path, the newest record of the cluster, so that on taking over the standby knows the
tree as the active last recorded it and the highest seq, and re-syncs from there: no gap, no
second snapshot. One follower lives as long as its daemon: each later takeover reads only what
was added since the last, and the follower rests (fetches nothing) while its daemon is active.
A new follower a term read the whole topic each time, and every such read left the daemon's
memory higher (allocator arenas of the consumer's threads, never given back)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.capture.delivery.publisher import CLUSTER_HEADER
from zkcdc.capture.records import Znode
from zkcdc.capture.tracker import TrackerState, znode_from_avro
from zkcdc.ground.backoff import Backoff
from zkcdc.ground.change_values import ChangeValueDecoder, ValueDecodeError
from zkcdc.ground.kafka_connection import KafkaConnection, close_consumer
from zkcdc.ground.unreadable_messages import UnreadableMessages

# The connection's consumer, prefetch bounded (`kafka_connection.CONSUMER_PREFETCH`).
FOLLOWER_CONSUMER: dict[str, Any] = {"enable.partition.eof": True}
FOLLOWER_BATCH = 1000  # messages handed over by one consume() at most

_AWAY = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def _kafka_away(exc: KafkaException) -> bool:
    """The brokers not answering (restarting, all down): no reason to stop a standby."""
    error: KafkaError = exc.args[0]
    return error.code() in _AWAY or error.retriable()


class TopicFollower:
    def __init__(
        self,
        kafka: KafkaConnection,
        topic: str,
        cluster: str,
        decoder: ChangeValueDecoder,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        # read_committed (the connection's): a fenced daemon's aborted records are never
        # taken for the active's. EOF events say where a partition's readable end is: the
        # last offsets of a transactional topic are commit markers no message stands at.
        self._consumer = kafka.consumer("zkcdc-capture-standby", FOLLOWER_CONSUMER)
        self._topic = topic
        self._cluster = cluster
        self._decoder = decoder
        self._now = now
        self._latest: dict[str, tuple[int, Znode | None]] = {}
        self._seq = 0
        self._mode = ""
        self._zxid = 0
        self._lock = threading.Lock()
        self._assigned = False
        self._resting = False
        self._ends_reached: dict[int, int] = {}  # partition -> offset of its latest EOF
        self.skipped = UnreadableMessages(f"standby of {topic}")

    def _assign(self, timeout: float) -> None:
        if self._assigned:
            return
        metadata = self._consumer.list_topics(self._topic, timeout=timeout)
        topic = metadata.topics.get(self._topic)
        if topic is None or topic.error is not None:
            return  # nothing given out yet
        self._consumer.assign(
            [TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in topic.partitions]
        )
        self._assigned = True

    def rest(self) -> None:
        """Fetches nothing until the next `poll` or `catch_up` (its daemon is active): what
        was prefetched is dropped and read again from where this follower got to."""
        if self._assigned and not self._resting:
            self._consumer.pause(self._consumer.assignment())
            self._resting = True

    def _wake(self) -> None:
        if self._resting:
            self._consumer.resume(self._consumer.assignment())
            self._resting = False

    def poll(self, timeout: float) -> int:
        """Reads what is there within `timeout`; returns how many records it took in."""
        try:
            self._assign(timeout)
            if not self._assigned:
                return 0
            self._wake()
            messages = self._consumer.consume(FOLLOWER_BATCH, timeout)
        except KafkaException as exc:
            if _kafka_away(exc):
                return 0  # a standby waits the brokers out, as the active does (BENCHMARKS.md, B6)
            raise DeliveryError(f"standby cannot read {self._topic}: {exc}") from exc
        taken = 0
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    self._ends_reached[message.partition() or 0] = message.offset() or 0
                continue
            found = self.skipped.read(message, self._ours)
            if found is not None:
                taken += 1
                self._take(*found)
        return taken

    def _ours(self, message: Any) -> tuple[dict[str, Any], Znode | None] | None:
        """The change record of this cluster a message holds, with its image as kept, None for
        another cluster's; raises for what no version of zkcdc's schema reads (skipped and
        counted)."""
        headers = dict(message.headers() or [])
        if headers.get(CLUSTER_HEADER) not in (None, self._cluster.encode()):
            return None
        value = message.value()
        if value is None:
            raise ValueDecodeError("no value")
        record = self._decoder.decode(value)
        if record["cluster"] != self._cluster:
            return None
        return record, znode_from_avro(record["after"])  # an image it cannot keep fails here

    def _take(self, record: dict[str, Any], after: Znode | None) -> None:
        seq = record["seq"]
        with self._lock:
            source = record["source"]
            if seq > self._seq:
                self._seq, self._mode = seq, source["mode"]
            if source["mode"] in ("txnlog", "kraft") and not source["snapshot"] and record["zxid"]:
                self._zxid = max(self._zxid, record["zxid"])  # where a log-reading source was
            if record["op"] == "HEARTBEAT":
                return
            path = record["path"]
            if path not in self._latest or self._latest[path][0] < seq:
                self._latest[path] = (seq, after)

    def catch_up(self, timeout: float, progress: Callable[[], None] = lambda: None) -> None:
        """Reads to the end of every partition as it is now; `progress` after each poll. It
        gives up only when its reading stalls for ten `timeout`s: a long topic read slowly
        (a throttled link, a loaded machine) is read to its end however long that takes."""
        stall_s = max(timeout, 1.0) * 10
        deadline = self._now() + stall_s
        backoff = Backoff(first_s=0.5, most_s=2.0)
        # not a wait: a retry while a topic made a moment ago has no partition leaders yet
        while True:
            try:
                self._assign(timeout)
                if not self._assigned:
                    return
                self._wake()
                ends = {}
                for tp in self._consumer.assignment():
                    _, high = self._consumer.get_watermark_offsets(tp, timeout=timeout)
                    ends[tp.partition] = high
                break
            except KafkaException as exc:
                # A topic created a moment ago may not have its partition leaders yet.
                if self._now() > deadline:
                    raise DeliveryError(f"standby cannot read {self._topic}: {exc}") from exc
                time.sleep(backoff.failed())
        read_to: dict[int, int] | None = None
        while True:
            current = {
                tp.partition: tp.offset
                for tp in self._consumer.position(self._consumer.assignment())
            }
            reached = {p: max(current.get(p, -1), self._ends_reached.get(p, -1)) for p in ends}
            if all(reached[p] >= end for p, end in ends.items() if end > 0):
                return
            if reached != read_to:
                read_to, deadline = reached, self._now() + stall_s  # reading on: not stuck
            elif self._now() > deadline:
                raise DeliveryError(
                    f"standby could not read {self._topic} to its end: no progress in "
                    f"{stall_s:.0f} s"
                )
            self.poll(1.0)
            progress()

    def state(self) -> TrackerState:
        with self._lock:
            tree = {p: z for p, (_, z) in self._latest.items() if z is not None}
            return TrackerState(cluster=self._cluster, seq=self._seq, tree=tree, mode=self._mode,
                                zxid=self._zxid)  # fmt: skip

    def close(self) -> None:
        close_consumer(self._consumer)
