"""The Kafka edge of capture: records onto the changes topic, idempotently and in per-path order.

The producer is idempotent with `acks=all` and no delivery timeout, so while the brokers are
away librdkafka holds and retries what it has; what does not fit its queue waits here. The event
log is written before anything is produced, so what is still unacknowledged at a crash is
published again by the next run (see `topic_holdings.delivered_seqs`)."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from zkcdc.capture import failpoints
from zkcdc.capture.delivery import transactions
from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.capture.delivery.transactions import (
    COMMIT_INTERVAL_S,
    FENCED,
    MOST_RECORDS,
    PASSING,
    EndInFlight,
    Fenced,
    Transaction,
    TransactionLost,
)
from zkcdc.capture.oversize import (
    DEFAULT_MAX_RECORD_BYTES,
    MESSAGE_OVERHEAD,
    OMITTED_HEADER,
    fitted,
)
from zkcdc.ground import logs
from zkcdc.ground.kafka_connection import KafkaConnection

log = logs.get("zkcdc.capture")

SEQ_HEADER = "zkcdc.seq"
# What produce() says of a topic a restarted broker does not know yet (see `_hand_over`).
NOT_KNOWN_YET = frozenset(
    {KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART}
)
# A commit goes through in a second or two once the brokers answer; this long, it is stuck.
STALLED_S = 15.0
# How soon the loop looks again whether a commit on its own thread has ended (then the records
# that waited for it go into the next transaction).
COLLECT_EVERY_S = 0.002
CLUSTER_HEADER = "zkcdc.cluster"

Serialize = Callable[[dict[str, Any]], bytes]


def producer_config(
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES, transactional_id: str | None = None
) -> dict[str, Any]:
    """Capture's producer settings, over the connection's."""
    config: dict[str, Any] = {
        # Room for a record of a znode as large as ZooKeeper allows (see `capture.oversize`).
        "message.max.bytes": max_record_bytes + MESSAGE_OVERHEAD,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 0,  # never give up on a record: the brokers will come back
        # librdkafka's own queue while the brokers are away, bounded: what does not fit waits
        # in the event log (`zkcdc.capture.delivery.kafka_feed`), not in memory (its default is 1 GiB).
        "queue.buffering.max.kbytes": max(
            64 * 1024, 2 * (max_record_bytes + MESSAGE_OVERHEAD) // 1024
        ),
        "linger.ms": 5,
        "compression.type": "lz4",
        # A deleted changes topic must not come back by a broker's auto-creation (one
        # partition, its default message size): `topic_guard` says what happened instead.
        "allow.auto.create.topics": False,
    }
    if transactional_id is not None:
        # A record that times out aborts its transaction; it goes again in the next one.
        config.update(transactions.transactional_config(transactional_id))
    return config


def key_for(cluster: str, path: str) -> bytes:
    """cluster + path: one znode's records share a partition, so their order holds."""
    return f"{cluster}{path}".encode()


PARTITIONER = -1  # produce()'s partition for "the partitioner's choice" (by key)


def heartbeat_partition(seq: int, partitions: int) -> int | None:
    """The partition a heartbeat goes to: seq mod the topic's partitions, so a round of as many
    heartbeats as there are partitions (consecutive seqs: `runner`) reaches every one. The
    alert job's order waits on every partition's newest seq (streaming/rules/seq_order.py):
    a heartbeat keeps a quiet partition's moving. None: the partitioner's choice (count
    unknown)."""
    return seq % partitions if partitions > 0 else None


def headers_for(cluster: str, seq: int) -> list[tuple[str, str | bytes | None]]:
    """What a consumer reads without decoding: the record's seq and cluster."""
    return [(SEQ_HEADER, str(seq).encode()), (CLUSTER_HEADER, cluster.encode())]


def _close(producer: Any) -> None:
    with warnings.catch_warnings(), contextlib.suppress(KafkaException, RuntimeError):
        # "abort_transaction failed during close": there was none to abort.
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.close()


def _no_ack(note: dict[str, Any]) -> None:
    pass


def _ack_note(record: dict[str, Any]) -> dict[str, Any]:
    # Held until the ack (by librdkafka, up to its queue's 100,000 messages): a few fields,
    # not the record with its images.
    return {"seq": record["seq"], "op": record.get("op"), "ts_ms": record.get("ts_ms")}


class Publisher:
    def __init__(
        self,
        kafka: KafkaConnection,
        topic: str,
        serialize: Serialize,
        producer_factory: Callable[..., Any] | None = None,
        max_value_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        max_waiting: int = 10_000,
        transactional_id: str | None = None,
        start_timeout_s: float = 30.0,
        now: Callable[[], float] = time.monotonic,
        commit_interval_s: float = COMMIT_INTERVAL_S,
        commit_records: int = MOST_RECORDS,
        end_in_background: bool = True,
    ) -> None:
        """`max_value_bytes`: the largest value the topic takes; a larger record goes out
        without its images' bytes, flagged (`capture.oversize`). `transactional_id`: publish
        in transactions under it, fencing every earlier producer of it first (before this
        returns); acknowledged then means committed. A transaction commits once its first
        record has waited `commit_interval_s` or it holds `commit_records`, whichever comes
        first; `end_in_background`: each commit on a thread of its own (`EndInFlight`), the
        loop's turns going on meanwhile."""
        self.topic = topic
        self.max_value_bytes = max_value_bytes
        self.max_waiting = max_waiting
        self._serialize = serialize
        make = producer_factory or kafka.producer
        self._producer = make(producer_config(max_value_bytes, transactional_id))
        self.client = self._producer  # for metadata: a producer never auto-creates a topic
        self._txn: Transaction | None = None
        if transactional_id is not None:
            try:
                transactions.start(self._producer, transactional_id, start_timeout_s)
            except DeliveryError:
                # Closed, not left to the collector: a producer whose init timed out goes on
                # asking for the id's epoch, and once it gets it fences the one tried next.
                _close(self._producer)
                raise
            self._txn = Transaction(
                self._producer, transactional_id, now=now, most_records=commit_records
            )
        self._now = now
        self.commit_interval_s = commit_interval_s
        self._end_in_background = end_in_background
        self._ending: EndInFlight | None = None
        # Not yet handed to librdkafka: each record with its serialized form, if known yet.
        self._waiting: deque[tuple[dict[str, Any], bytes | None]] = deque()
        self._unacked: deque[int] = deque()  # seqs handed over, in order
        self._acked: set[int] = set()
        self.acked_through = 0
        self.acked_count = 0
        self._error: str | None = None
        self._fenced: str | None = None
        # The topic's partitions, once known (the topic guard's count): heartbeats go to
        # each in turn (`heartbeat_partition`).
        self.partitions = 0
        self.on_ack: Callable[[dict[str, Any]], None] = _no_ack

    @property
    def transactional(self) -> bool:
        return self._txn is not None

    @property
    def backlog(self) -> int:
        return len(self._waiting) + len(self._unacked)

    @property
    def room(self) -> int:
        """How many more records it takes into memory (beyond librdkafka's bounded queue)."""
        return self.max_waiting - len(self._waiting)

    def publish(
        self, records: Iterable[dict[str, Any]], values: Iterable[bytes] | None = None
    ) -> None:
        """Queues records in order; `values`, if given, are their serialized forms already."""
        if values is None:
            self._waiting.extend((record, None) for record in records)
        else:
            self._waiting.extend(zip(records, values, strict=True))
        self._hand_over()

    def _hand_over(self) -> None:
        txn = self._txn
        if txn is not None:
            if self._ending is not None or not self._waiting or txn.room <= 0:
                return  # the transaction is full or ending: the rest waits for the next
            if not txn.open:
                txn.begin()
        while self._waiting:
            if txn is not None and txn.room <= 0:
                return
            record, value = self._waiting[0]
            if value is None:
                value = self._serialize(record)
            headers = headers_for(record["cluster"], record["seq"])
            sent = value
            if len(value) > self.max_value_bytes:
                sent, omitted = fitted(record, self._serialize, self.max_value_bytes)
                headers.append((OMITTED_HEADER, omitted))
            beat = record["op"] == "HEARTBEAT"
            partition = heartbeat_partition(record["seq"], self.partitions) if beat else None
            try:
                self._producer.produce(
                    self.topic,
                    key=key_for(record["cluster"], record["path"]),
                    value=sent,
                    timestamp=record["captured_ms"],
                    headers=headers,
                    on_delivery=self._delivered(record),
                    partition=PARTITIONER if partition is None else partition,
                )
            except BufferError:
                return  # librdkafka's queue is full: the rest waits for acks
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() in NOT_KNOWN_YET:
                    # Every broker restarted: the first to answer says the topic has no
                    # partitions until its metadata comes, and librdkafka refuses records for
                    # it meanwhile. They wait here; the topic guard says if it is really gone.
                    self._waiting[0] = (record, value)
                    return
                if error.code() == KafkaError._FATAL:
                    # The producer failed before this record (fenced, say): poll raises that
                    # error, as its kind, so the term ends as it should, not the daemon.
                    self._serve(0)
                    raise self._fatal(exc) from exc
                if txn is not None:
                    if error.txn_requires_abort() or error.code() == KafkaError._STATE:
                        # The transaction failed before its delivery reports came (a record
                        # refused, say): it aborts, then everything goes again, in order.
                        txn.abort_soon(error.str())
                        return
                    raise transactions.refusal(exc, txn.transactional_id, "producing") from exc
                raise DeliveryError(f"cannot produce to {self.topic}: {exc}") from exc
            self._waiting.popleft()
            self._unacked.append(record["seq"])
            if txn is not None:
                txn.holds((record, value))

    def _delivered(self, record: dict[str, Any]) -> Callable[[KafkaError | None, Any], None]:
        note = _ack_note(record)

        def callback(error: KafkaError | None, message: Any) -> None:
            failpoints.hit("kafka.ack")
            if error is not None:
                code = error.code()
                if code in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT):
                    return  # given up on (`give_up`): the event log holds it
                if self._txn is not None and code in FENCED:
                    self._fenced = error.str()  # another daemon's producer took over
                    return
                if self._txn is not None and (code in PASSING or error.retriable()):
                    self._txn.abort_soon(error.str())  # its records go again, next time
                    return
                self._error = f"{self.topic}: {error.str()}"
                return
            if self._txn is None:
                self._ack(note)
            # In a transaction, delivered is not yet readable: acknowledged at its commit.

        return callback

    def _ack(self, note: dict[str, Any]) -> None:
        seq = note["seq"]
        self._acked.add(seq)
        self.acked_count += 1
        while self._unacked and self._unacked[0] in self._acked:
            self._acked.discard(self._unacked[0])
            self.acked_through = self._unacked.popleft()
        self.on_ack(note)

    def poll(self, timeout: float = 0.0) -> None:
        self._serve(timeout)
        if self._fenced is not None:
            raise Fenced(f"another daemon's producer fenced this one: {self._fenced}")
        if self._error is not None:
            raise DeliveryError(f"Kafka refused a record: {self._error}")
        self._end_transaction()
        self._hand_over()

    def _serve(self, timeout: float) -> None:
        """librdkafka's callbacks. A fatal error comes out of poll (no error_cb is set): that
        producer is done for, and capture's term with it (a new one fences it and resends)."""
        try:
            self._producer.poll(timeout)
        except KafkaException as exc:
            raise self._fatal(exc) from exc

    def _fatal(self, exc: KafkaException) -> DeliveryError:
        if self._txn is None:
            return DeliveryError(f"Kafka failed capture's producer: {exc.args[0].str()}")
        failed = transactions.refusal(exc, self._txn.transactional_id, "delivering")
        if isinstance(failed, Fenced | transactions.TransactionsRefused):
            return failed
        # B6 and the every-broker-down test: a record stalled in librdkafka past its timeout
        # while the commit was under way; the abort it needs is refused (INVALID_TXN_STATE).
        return TransactionLost(str(failed))

    def check_stalled(self, brokers_answering_s: float) -> None:
        """Raises TransactionLost when the transaction's end has been under way for
        `STALLED_S` while the brokers have answered in full all that time: librdkafka holds a
        record it no longer sends after every broker restarted (librdkafka#1432) and would
        wait out its timeout, then fail fatally. A new producer fences this one (its
        transaction aborted) and the records go again."""
        txn = self._txn
        # Read once: the end's own thread (`EndInFlight`) may finish it meanwhile and clear
        # them, between a check and a use.
        since = None if txn is None else txn.ending_since
        if txn is None or since is None:
            return
        ending = txn.ending or "end"
        waited = self._now() - since
        if min(waited, brokers_answering_s) >= STALLED_S:
            raise TransactionLost(
                f"a transaction's {ending} has been under way {waited:.0f} s while the "
                f"brokers answered for {brokers_answering_s:.0f} s: its producer holds a record "
                f"it does not send; a new producer fences it and sends again"
            )

    def due_in(self) -> float | None:
        """Seconds until this publisher wants a turn of the loop: to see whether the end in
        flight is over, or to start a commit that falls due; None: not before more records."""
        if self._ending is not None:  # before the transaction: its thread may close it now
            return COLLECT_EVERY_S
        txn = self._txn
        if txn is None or not txn.open:
            return None
        return txn.due_in(self.commit_interval_s)

    def _end_transaction(self, wait: bool = False) -> None:
        """Takes the outcome of an end in flight once it is over; then a transaction whose
        commit is due (`Transaction.commit_due`; with `wait`, any holding records) is committed
        (over as many calls as that takes), and one that must abort is aborted and its records
        queued again, first. `wait`: each call made here and waited for, none in flight."""
        txn = self._txn
        if txn is None:
            return
        if self._ending is not None:
            if not (wait or self._ending.done):
                return
            self._take_ending(txn)
        if not txn.open or (not txn.items and txn.ending is None):
            return
        if not (wait or txn.commit_due(self.commit_interval_s)):
            return
        if txn.ending is None:
            try:
                failpoints.hit("kafka.commit")
            except failpoints.ProducerLost as exc:
                raise TransactionLost(str(exc)) from exc
        if self._end_in_background and not wait:
            txn.ask_end()  # no more records into it from here
            self._ending = EndInFlight(txn)
        else:
            self._ended(txn, txn.end())

    def _take_ending(self, txn: Transaction) -> None:
        """The end in flight's outcome, taken (waited for while it is under way)."""
        ending, self._ending = self._ending, None
        assert ending is not None
        self._ended(txn, ending.result())

    def _ended(self, txn: Transaction, outcome: str | None) -> None:
        if outcome == "committed":
            failpoints.hit("kafka.committed")
            for record, _ in txn.take_items():
                self._ack(_ack_note(record))
        elif outcome == "aborted":
            items = txn.take_items()
            log.warning("a transaction was aborted: its records go again", records=len(items),
                        reason=txn.reason)  # fmt: skip
            for record, _ in items:
                self._unacked.remove(record["seq"])
            self._waiting.extendleft(reversed(items))

    def give_up(self) -> int:
        """A lost term: nothing more goes out. What waits here and in librdkafka's queue is
        dropped (the event log holds it; the next term resends what Kafka lacks), and an open
        transaction aborted (the next active's fencing would abort it anyway); without
        transactions a batch already on the wire may still land. Returns how many records
        were not sent for sure."""
        if self._ending is not None and self._txn is not None:
            with contextlib.suppress(DeliveryError):  # fenced already, say
                self._take_ending(self._txn)  # a commit that made it: acknowledged
        dropped = len(self._waiting)
        self._waiting.clear()
        with contextlib.suppress(KafkaException):  # a fenced producer may refuse even this
            self._producer.purge(in_queue=True, in_flight=False)
            self._producer.poll(0)  # their delivery reports (purged) come back now
        self._error = None
        if self._txn is not None and self._txn.open:
            self._txn.abort_soon("stepping down")
            with contextlib.suppress(DeliveryError):  # fenced already, say
                self._txn.end()
        self._let_go()
        return dropped + len(self._unacked)

    def _let_go(self) -> None:
        """Nothing of this publisher is left in librdkafka: every record still in flight is
        purged and its report served, so no callback (which holds the publisher, which holds
        the producer) stays in the C library, out of the cycle collector's sight. The lost
        term's producer is then freed, its threads and connections with it, as soon as the
        term lets go of it (its topic guard's last request, say), not kept for good."""
        with contextlib.suppress(KafkaException):
            self._producer.purge(in_queue=True, in_flight=True)
            self._producer.poll(0)
        self.on_ack = _no_ack

    def flush(self, timeout: float) -> bool:
        """Delivers (and commits) everything it can within `timeout`; True when nothing is
        left."""
        deadline = time.monotonic() + timeout
        self._hand_over()
        if self._txn is None:
            try:
                self._producer.flush(timeout)
            except KafkaException as exc:
                raise self._fatal(exc) from exc
            self.poll(0)
            return self.backlog == 0
        while self.backlog and time.monotonic() < deadline:
            self._serve(0)
            if self._error is not None:
                raise DeliveryError(f"Kafka refused a record: {self._error}")
            self._end_transaction(wait=True)  # may overrun the deadline by one END_WAIT_S
            self._hand_over()
        return self.backlog == 0
