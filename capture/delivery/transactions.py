"""Capture's records in Kafka transactions, so a daemon that lost its term cannot add to the
stream: the next active's `init_transactions` under the same `transactional.id` fences the old
producer (its open transaction aborted, its next call refused) and consumers that read committed
records never see what it still had in flight (Kafka Connect's exactly-once sources, KIP-618).

A transaction holds what the loop handed over since it began; its commit starts once its first
record has waited the commit interval (none by default, `COMMIT_INTERVAL_S` says why; Kafka
Streams' exactly-once commits every 100 ms) or it holds the most records a transaction may,
whichever comes first. The commit runs on a thread of its own (`EndInFlight`), so the loop
goes on reading and logging while Kafka answers; records logged meanwhile wait for the next
transaction, so busy turns group by themselves. A transaction that must abort (records timed
out while the brokers were away) is aborted and its records go out again in the next one, in
order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from zkcdc.capture.delivery.delivery_errors import DeliveryError

TXN_TIMEOUT_MS = 60_000
# How long one call to commit or abort may block a turn. librdkafka (2.16) resumes a commit that
# timed out by queueing its first step to its main thread again; if that step is not served
# within the call's wait, the call returns forgetting it was a commit, and an EndTxn answer
# arriving before the next call is taken for an abort's: "Invalid transaction state
# transition: CommittingTransaction -> AbortedNotAcked", an assertion that kills the process.
# Its main thread lagged > 0.1 s under the suite's load, repeatedly; with a 1-3 ms wait
# and CPU-bound neighbours it trips within a few hundred commits. A commit takes ~45 ms, so it
# rarely needs a second call at all, and a turn blocks at most this long while Kafka is away.
END_WAIT_S = 1.0
MOST_RECORDS = 10_000  # one transaction's records, kept until its commit for a resend
# A record waits for its transaction's interval, then for the commit (~30-60 ms here, with the
# one before it still in flight at worst). With none, a commit starts as soon as a turn has
# handed records over and none is under way, so what comes during a commit groups into the
# next by itself. At 1,000 writes/s on two cores the p99 from a write to readable was 106-142
# ms with none in seven of ten runs of bench B1t (265-383 in the others), and under 150 ms in
# one of ten at 10 ms (136-486); at the ceiling both reached 84-103 % of the idempotent mode's
# throughput.
COMMIT_INTERVAL_S = 0.0

FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
}
_REFUSED = {
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
}
_TOO_OLD = {KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE}
# Delivery errors a later transaction may not meet: the brokers away or moving leaders, or a
# broker just restarted that does not know the topic yet (B6: all brokers restarted, one said
# the topic had 0 partitions). A topic really deleted is the topic guard's to say (it waits
# for agreeing answers), while the aborted records go again.
PASSING = {
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
}


class Fenced(DeliveryError):
    """Another daemon opened this stream's transactional id: this one's term is over."""


class TransactionsRefused(DeliveryError):
    """Kafka will not let capture use transactions (rights, or brokers too old)."""


class TransactionLost(DeliveryError):
    """The producer's transaction is in a state it cannot leave (its coordinator restarted and
    lost it, say): a new producer must fence this one and send its records again."""


class TransactionsNotReady(DeliveryError):
    """Kafka did not answer in time (a coordinator moving, brokers starting): try again."""


def transactional_config(transactional_id: str) -> dict[str, Any]:
    return {
        "transactional.id": transactional_id,
        "transaction.timeout.ms": TXN_TIMEOUT_MS,
        # librdkafka: a record may not wait longer than its transaction may last.
        "message.timeout.ms": TXN_TIMEOUT_MS,
        # A transaction begun while the last one's markers are still being written is told
        # CONCURRENT_TRANSACTIONS and tries again after this (KAFKA-5477; librdkafka backs off
        # exponentially from it, up to 1 s); and a commit sends at once, so lingering only
        # delays it. At librdkafka's defaults (100 ms, and our 5 ms linger) a commit took
        # 100 ms at p50 here, with these 45 ms.
        "retry.backoff.ms": 1,
        "linger.ms": 0,
    }


def refusal(exc: KafkaException, transactional_id: str, doing: str) -> DeliveryError:
    """What a failed transactional call means, as one line of its own kind."""
    error: KafkaError = exc.args[0]
    code = error.code()
    what = f"transactional.id {transactional_id}"
    if code in FENCED:
        return Fenced(f"another daemon took {what} (this one was fenced while {doing})")
    if code in _REFUSED:
        return TransactionsRefused(
            f"Kafka refused transactions for {what}: {error.str()}; grant capture's principal "
            "WRITE and DESCRIBE on that TransactionalId (and IDEMPOTENT_WRITE on the cluster "
            "for brokers before 3.0), or run with --no-transactions"
        )
    if code in _TOO_OLD:
        return TransactionsRefused(
            f"the brokers do not support transactions ({error.str()}): Kafka 0.11 or later is "
            "needed, or run with --no-transactions"
        )
    if error.retriable() or code == KafkaError._TIMED_OUT:
        return TransactionsNotReady(f"Kafka did not answer while {doing} ({what}): {error.str()}")
    return DeliveryError(
        f"Kafka failed capture's transaction while {doing} ({what}): {error.str()}"
    )


def start(producer: Any, transactional_id: str, timeout_s: float) -> None:
    """Fences every earlier producer of the id (their open transactions aborted, completed
    ones finished) before anything of this one's is read or written."""
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        raise refusal(exc, transactional_id, "starting") from exc


Item = tuple[dict[str, Any], bytes | None]


class Transaction:
    """The producer's current transaction: what it holds, and how far its end has got."""

    def __init__(
        self,
        producer: Any,
        transactional_id: str,
        now: Callable[[], float] = time.monotonic,
        most_records: int = MOST_RECORDS,
    ) -> None:
        self._producer = producer
        self.transactional_id = transactional_id
        self._now = now
        self.most_records = most_records
        self.open = False
        self.first_at = 0.0  # when its first record was handed over
        self.ending: str | None = None  # "commit" or "abort" once asked for
        self.ending_since: float | None = None  # when its end was first asked for
        self.items: list[Item] = []
        self.reason = ""  # why it is aborting

    @property
    def room(self) -> int:
        return 0 if self.ending is not None else self.most_records - len(self.items)

    def holds(self, item: Item) -> None:
        if not self.items:
            self.first_at = self._now()
        self.items.append(item)

    def commit_due(self, interval_s: float) -> bool:
        """Its commit (or the abort asked for) should start now (`due_in` is 0)."""
        return self.due_in(interval_s) == 0.0

    def due_in(self, interval_s: float) -> float | None:
        """Seconds until its commit (or the abort asked for) should start: once the first
        record has waited `interval_s`, or at once when it is full or its end was asked for;
        None while it holds nothing."""
        if self.ending is not None:
            return 0.0
        if not self.items:
            return None
        if len(self.items) >= self.most_records:
            return 0.0
        return max(0.0, self.first_at + interval_s - self._now())

    def ask_end(self) -> None:
        """From now on it takes no more records: its commit (or the abort asked for) starts."""
        if self.ending is None:
            self.ending, self.ending_since = "commit", self._now()

    def begin(self) -> None:
        self._call(self._producer.begin_transaction, "beginning a transaction")
        self.open = True

    def abort_soon(self, reason: str) -> None:
        """Aborts the transaction on its next `end`, unless a commit of it was asked for
        already: that commit goes on. librdkafka refuses an abort while a commit it timed out
        on is in progress ("Conflicting commit_transaction API call is already in progress",
        retriable: asked again every turn, it never ends), and a transaction that cannot
        commit fails its commit as abortable, which `end` turns into the abort."""
        if self.open and self.ending is None:
            self.ending, self.reason, self.ending_since = "abort", reason, self._now()

    def end(self) -> str | None:
        """Commits (or aborts) on: "committed", "aborted", or None while it goes on. Every
        call waits `END_WAIT_S` at most, never less (see there)."""
        self.ask_end()
        try:
            if self.ending == "commit":
                self._producer.commit_transaction(END_WAIT_S)
            else:
                self._producer.abort_transaction(END_WAIT_S)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if self.ending == "commit" and error.txn_requires_abort():
                self.ending, self.reason = "abort", error.str()
                return None
            if error.retriable() or error.code() == KafkaError._TIMED_OUT:
                return None  # goes on in the background; asked again next turn
            failed = refusal(exc, self.transactional_id, f"ending a transaction ({self.ending})")
            if type(failed) is DeliveryError:
                # Not fenced, not refused: this producer's transaction is beyond saving (B6:
                # an abort after its coordinator restarted, INVALID_TXN_STATE).
                raise TransactionLost(str(failed)) from exc
            try:
                raise failed from exc
            finally:
                del failed  # else this frame and the error's traceback hold each other
        outcome = "committed" if self.ending == "commit" else "aborted"
        self.open, self.ending, self.ending_since = False, None, None
        return outcome

    def take_items(self) -> list[Item]:
        items, self.items = self.items, []
        return items

    def _call(self, call: Callable[[], None], doing: str) -> None:
        try:
            call()
        except KafkaException as exc:
            raise refusal(exc, self.transactional_id, doing) from exc


class EndInFlight:
    """One call of `Transaction.end` on a thread of its own: a commit is a round of requests to
    the transaction coordinator (tens of ms, up to `END_WAIT_S`), and the capture loop goes on
    reading and logging meanwhile instead of stamping every record behind it late. Nothing else
    touches the transaction until `result` was taken: the loop hands over no record while an
    end is in flight."""

    def __init__(self, txn: Transaction) -> None:
        self._txn = txn
        self._outcome: str | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        threading.Thread(target=self._run, name="zkcdc-txn-end", daemon=True).start()

    def _run(self) -> None:
        try:
            self._outcome = self._txn.end()
        except BaseException as exc:  # handed to the loop's thread, raised there
            self._error = exc
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the call is over (its outcome not taken yet)."""
        return self._done.wait(timeout)

    def result(self) -> str | None:
        """Waits for the call (`END_WAIT_S` at most, as it waits no longer), then gives what
        `end` returned or raises what it raised."""
        self._done.wait()
        error, self._error = self._error, None
        if error is not None:
            try:
                raise error
            finally:
                del error  # else this frame and the error's traceback hold each other
        return self._outcome
