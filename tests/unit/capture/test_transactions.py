"""The publisher's transactions as a state machine, over a fake of librdkafka's transactional
producer (commits that time out and resume, transactions that must abort, a fence): every record
is committed once, in seq order, and acknowledged only when committed; Kafka's refusals are each
one error of their own kind. The real broker's side is the integration tier's
(`test_capture_faults.py`, `test_capture_transactions.py`)."""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.capture.delivery.publisher import SEQ_HEADER, STALLED_S, Publisher, producer_config
from zkcdc.capture.delivery.transactions import (
    END_WAIT_S,
    Fenced,
    TransactionLost,
    TransactionsNotReady,
    TransactionsRefused,
    refusal,
)
from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.ground.change_types import Op
from zkcdc.ground.kafka_connection import KafkaConnection


def _fail(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "scripted", **flags))


def _assert_full_wait(timeout: float) -> None:
    """A resumed commit given less time than librdkafka's main thread takes to serve its first
    step kills the process (an assertion in librdkafka 2.16; `END_WAIT_S` says how): every end
    call, in a turn, a flush or a step-down, waits the full time."""
    assert timeout == END_WAIT_S, f"an end call waited {timeout} s, not {END_WAIT_S}"


class TransactionalProducer:
    """librdkafka's transactional producer as the publisher drives it. `ends` scripts each
    commit call: "ok", "wait" (timed out: goes on in the background), "abort" (the transaction
    must abort), "fenced"."""

    def __init__(
        self, config: dict[str, Any], ends: list[str], unknown: list[int] | None = None
    ) -> None:
        assert config["transactional.id"] == "tid"
        assert config["message.timeout.ms"] <= config["transaction.timeout.ms"]
        self.ends = ends
        # Scripts each produce call: an error code it is refused with (a restarted broker
        # that does not know the topic yet), 0 to take it.
        self.unknown = unknown or []
        self.state = "new"
        self.open: list[tuple[int, Any]] = []
        self.committed: list[int] = []
        self.aborted: list[int] = []
        self.fatal: KafkaException | None = None  # raised by poll, as librdkafka's fatal error
        self.purged: list[Any] = []  # reports of purged records, not served yet

    def init_transactions(self, timeout: float) -> None:
        self.state = "ready"

    def begin_transaction(self) -> None:
        assert self.state == "ready", self.state
        self.state = "in"

    def produce(self, topic: str, key: bytes, value: bytes, timestamp: int, headers: Any,
                on_delivery: Any, partition: int = -1) -> None:  # fmt: skip
        assert self.state == "in", "produced outside a transaction"
        if self.unknown and (code := self.unknown.pop(0)):
            raise _fail(code)
        self.open.append((int(dict(headers)[SEQ_HEADER]), on_delivery))

    def poll(self, timeout: float) -> int:
        if self.fatal is not None:
            raise self.fatal
        purged, self.purged = self.purged, []
        for callback in purged:
            callback(KafkaError(KafkaError._PURGE_INFLIGHT), None)
        for _, callback in self.open:
            callback(None, None)  # delivered: not yet committed
        return 0

    def commit_transaction(self, timeout: float) -> None:
        _assert_full_wait(timeout)
        assert self.state in ("in", "committing"), self.state
        end = self.ends.pop(0) if self.ends else "ok"
        if end == "wait":
            self.state = "committing"
            raise _fail(KafkaError._TIMED_OUT, retriable=True)
        if end == "abort":
            self.state = "abortable"  # the commit call is over: an abort is what is left
            raise _fail(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True)
        if end == "fenced":
            raise _fail(KafkaError._FENCED, fatal=True)
        self.committed += [seq for seq, _ in self.open]
        self.open, self.state = [], "ready"

    def abort_transaction(self, timeout: float) -> None:
        _assert_full_wait(timeout)
        if self.state == "committing":  # as librdkafka 2.16 answers (retriable: never ends)
            raise _fail(KafkaError._CONFLICT, retriable=True)
        self.aborted += [seq for seq, _ in self.open]
        self.open, self.state = [], "ready"

    def purge(self, in_queue: bool = True, in_flight: bool = True) -> None:
        if in_flight:  # as librdkafka: their reports come at the next poll, then let go
            self.purged += [callback for _, callback in self.open]
            self.open = []

    def close(self) -> bool:
        self.state = "closed"
        return True


def _records(first: int, count: int) -> list[dict[str, Any]]:
    before, after = Znode(b"v", 1), Znode(b"w", 2)
    return [
        ChangeRecord("c1", seq, Op.UPDATE, f"/x/{seq % 5}", before, after, seq, seq, seq).to_avro()
        for seq in range(first, first + count)
    ]


def _publisher(
    ends: list[str],
    now: Any = None,
    unknown: list[int] | None = None,
    background: bool = False,
    interval_s: float = 0.0,
) -> tuple[Publisher, TransactionalProducer]:
    """In the loop's thread and every turn unless told (the state machine, step by step); the
    daemon's default ends in the background (the tests below `_settled`)."""
    made: list[TransactionalProducer] = []

    def factory(config: dict[str, Any]) -> TransactionalProducer:
        made.append(TransactionalProducer(config, ends, unknown))
        return made[0]

    publisher = Publisher(KafkaConnection(bootstrap_servers="k"), "t", SingleObjectCodec().encode,
                          producer_factory=factory, transactional_id="tid",
                          end_in_background=background, commit_interval_s=interval_s,
                          **({} if now is None else {"now": now}))  # fmt: skip
    assert made[0].state == "ready", "fenced (init_transactions) before anything else"
    return publisher, made[0]


def test_a_producer_whose_start_timed_out_is_closed_so_it_cannot_fence_the_next_one() -> None:
    """librdkafka goes on asking for the id's epoch after init_transactions timed out; left
    alive until the collector came, such a producer (one per try while the brokers were away)
    would fence the producer of the try that succeeded."""
    made: list[TransactionalProducer] = []

    def factory(config: dict[str, Any]) -> TransactionalProducer:
        producer = TransactionalProducer(config, [])

        def init_transactions(timeout: float) -> None:
            raise _fail(KafkaError._TIMED_OUT, retriable=True)

        producer.init_transactions = init_transactions  # type: ignore[method-assign]
        made.append(producer)
        return producer

    with pytest.raises(TransactionsNotReady, match="did not answer while starting"):
        Publisher(KafkaConnection(bootstrap_servers="k"), "t", SingleObjectCodec().encode,
                  producer_factory=factory, transactional_id="tid")  # fmt: skip
    assert made[0].state == "closed"


def test_records_are_acknowledged_when_their_transaction_commits_not_when_delivered() -> None:
    publisher, producer = _publisher(["wait", "wait", "ok"])
    publisher.publish(_records(1, 3))
    publisher.poll(0)  # delivered, the commit asked for: it goes on
    assert publisher.acked_through == 0 and producer.committed == []
    publisher.publish(_records(4, 2))  # while it commits: wait for the next transaction
    publisher.poll(0)
    assert publisher.acked_through == 0
    publisher.poll(0)
    assert producer.committed == [1, 2, 3] and publisher.acked_through == 3
    publisher.poll(0)  # the next transaction: the two that waited
    assert producer.committed == [1, 2, 3, 4, 5] and publisher.acked_through == 5
    assert publisher.backlog == 0


def test_a_transaction_that_must_abort_sends_its_records_again_first_in_order() -> None:
    publisher, producer = _publisher(["abort"])
    publisher.publish(_records(1, 4))
    publisher.poll(0)  # the commit fails: abort asked for
    publisher.publish(_records(5, 1))
    for _ in range(3):
        publisher.poll(0)
    assert producer.aborted == [1, 2, 3, 4]
    assert producer.committed == [1, 2, 3, 4, 5] and publisher.acked_through == 5


def test_a_failed_delivery_while_a_timed_out_commit_goes_on_does_not_stall_it() -> None:
    """An abort asked for while librdkafka still works on a commit it timed out on is refused
    as a conflict, every time (a capture once stuck on it): the commit goes on and decides."""
    publisher, producer = _publisher(["wait", "wait", "ok"])
    publisher.publish(_records(1, 3))
    publisher.poll(0)  # the commit times out: it goes on in the background
    assert producer.state == "committing"
    publisher._txn.abort_soon("a delivery report failed")  # as the publisher's callback does
    for _ in range(3):
        publisher.poll(0)
    assert producer.committed == [1, 2, 3] and producer.aborted == []
    assert publisher.acked_through == 3


def test_a_fenced_producer_raises_fenced_and_gives_nothing_more() -> None:
    publisher, producer = _publisher(["fenced"])
    publisher.publish(_records(1, 2))
    with pytest.raises(Fenced, match=r"another daemon took transactional\.id tid"):
        publisher.poll(0)
    assert producer.committed == [] and publisher.acked_through == 0
    assert publisher.give_up() == 2  # stepping down: none of them went out for sure


@pytest.mark.parametrize(
    "code",
    [KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART],
)
def test_records_refused_for_a_topic_a_restarted_broker_does_not_know_yet_wait_and_go(
    code: int,
) -> None:
    """Every broker restarted: the first to answer lists the topic with no partitions, and
    produce() refuses records for it until its metadata comes (the CI run of stop 48 ended
    capture there). They wait in order; a topic really gone is the topic guard's to say."""
    publisher, producer = _publisher([], unknown=[0, code, code, code])
    publisher.publish(_records(1, 4))  # the first taken, then refused
    assert producer.open[0][0] == 1 and publisher.backlog == 4
    publisher.poll(0)  # the first committed; the second refused again
    publisher.poll(0)
    publisher.poll(0)  # the broker knows the topic: the rest go
    publisher.poll(0)
    assert producer.committed == [1, 2, 3, 4] and publisher.acked_through == 4
    assert publisher.backlog == 0


@settings(max_examples=60, deadline=None)
@given(
    ends=st.lists(st.sampled_from(["ok", "wait", "abort"]), max_size=30),
    batches=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    unknown=st.lists(st.sampled_from([0, 0, KafkaError._UNKNOWN_TOPIC]), max_size=30),
)
def test_whatever_the_commits_meet_every_record_is_committed_once_in_seq_order(
    ends: list[str], batches: list[int], unknown: list[int]
) -> None:
    publisher, producer = _publisher(list(ends), unknown=list(unknown))
    seq = 1
    for size in batches:
        publisher.publish(_records(seq, size))
        seq += size
        publisher.poll(0)
    # An abort takes two turns (the abort, then its records again), the others one.
    for _ in range(2 * len(ends) + len(unknown) + 5):
        publisher.poll(0)
    assert producer.committed == list(range(1, seq))
    assert publisher.acked_through == seq - 1 and publisher.backlog == 0


@pytest.mark.parametrize(
    ("code", "kind", "says"),
    [
        (KafkaError._FENCED, Fenced, "another daemon took"),
        (KafkaError.PRODUCER_FENCED, Fenced, "another daemon took"),
        (
            KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            TransactionsRefused,
            "--no-transactions",
        ),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, TransactionsRefused, "TransactionalId"),
        (KafkaError.UNSUPPORTED_VERSION, TransactionsRefused, "do not support transactions"),
        (KafkaError._TIMED_OUT, TransactionsNotReady, "did not answer"),
        (KafkaError.INVALID_TXN_STATE, DeliveryError, "failed capture's transaction"),
    ],
)
def test_each_refusal_is_one_line_of_its_own_kind(code: int, kind: type, says: str) -> None:
    error = refusal(_fail(code), "tid", "starting")
    assert type(error) is kind and says in str(error) and "\n" not in str(error)


def test_without_transactions_the_producer_is_idempotent_and_never_times_a_record_out() -> None:
    config = producer_config()
    assert config["enable.idempotence"] and config["message.timeout.ms"] == 0
    assert "transactional.id" not in config
    config = producer_config(transactional_id="tid")
    assert config["transactional.id"] == "tid"
    assert 0 < config["message.timeout.ms"] <= config["transaction.timeout.ms"]


@pytest.mark.parametrize(
    ("code", "kind"),
    [(KafkaError.INVALID_TXN_STATE, TransactionLost), (KafkaError._FENCED, Fenced),
     (KafkaError.PRODUCER_FENCED, Fenced)],
)  # fmt: skip
def test_a_fatal_error_out_of_poll_ends_the_term_as_its_kind_never_a_raw_exception(
    code: int, kind: type
) -> None:
    """Seen with every broker restarted: a record stalled in librdkafka past its timeout while
    the commit was under way, the abort it needed refused, and poll raised the fatal error."""
    publisher, producer = _publisher(["wait"])
    publisher.publish(_records(1, 2))
    publisher.poll(0)
    producer.fatal = _fail(code, fatal=True)
    with pytest.raises(kind):
        publisher.poll(0)
    with pytest.raises(kind):
        publisher.flush(1.0)
    assert producer.committed == [] and publisher.acked_through == 0
    assert publisher.give_up() == 2  # the next term (a new producer) sends them again


@pytest.mark.parametrize(
    ("code", "kind"),
    [(KafkaError.PRODUCER_FENCED, Fenced), (KafkaError.INVALID_TXN_STATE, TransactionLost),
     (None, TransactionLost)],
)  # fmt: skip
def test_a_record_refused_by_a_producer_failed_fatally_ends_the_term_as_the_fatal_kind(
    code: int | None, kind: type
) -> None:
    """Stop 48's CI run: the new term's producer had been fenced before its first record, and
    produce() said only "Local: Fatal error", which ended the daemon. The fatal error itself
    comes out of poll; it says what the term's end is."""
    publisher, producer = _publisher([], unknown=[KafkaError._FATAL])
    producer.fatal = None if code is None else _fail(code, fatal=True)
    with pytest.raises(kind):
        publisher.publish(_records(1, 2))
    assert publisher.give_up() == 2


@pytest.mark.parametrize(
    ("ends", "polled"),
    [(["wait"] * 3, True), (["fenced"], True), ([], False)],
    ids=["commit-under-way", "fenced", "not-yet-committing"],
)
def test_a_lost_terms_producer_is_freed_by_reference_counting_alone(
    ends: list[str], polled: bool
) -> None:
    """Each record in librdkafka holds its delivery callback, which holds the publisher, which
    holds the producer: a cycle through C the cycle collector cannot see. A lost term's
    producer (its threads, its connections retried for good) was never freed while a record
    of it was in flight; given up, nothing of it is left in the library."""
    publisher, producer = _publisher(list(ends))
    owner: list[Any] = [publisher]
    publisher.on_ack = owner.append  # a hook that holds its owner, as the outlet's did
    publisher.publish(_records(1, 3))
    if polled:
        with contextlib.suppress(Fenced):
            publisher.poll(0)
    assert producer.open, "records in flight when the term is lost"
    freed = weakref.ref(producer)
    gc.disable()  # reference counting alone, as for a term lost under CollectorPacing
    try:
        assert publisher.give_up() == 3
        del publisher, producer, owner
        assert freed() is None, "the lost term's producer outlived the term"
    finally:
        gc.enable()


def test_a_commit_stuck_while_the_brokers_answer_ends_the_term_but_an_outage_never_does() -> None:
    """librdkafka#1432: after every broker restarted, a record can stay unsent until its
    timeout (60 s) while the commit waits on it. Capture calls it stuck once the commit has
    waited `STALLED_S` with the brokers answering all that time, not while they are away."""
    clock = [1000.0]
    publisher, producer = _publisher(["wait"] * 10_000, now=lambda: clock[0])
    publisher.publish(_records(1, 3))
    publisher.poll(0)  # the commit is under way
    for _ in range(120):  # two minutes of outage: the brokers never answer
        clock[0] += 1.0
        publisher.poll(0)
        publisher.check_stalled(brokers_answering_s=0.0)
    publisher.check_stalled(brokers_answering_s=STALLED_S - 1)  # back, but not for long yet
    with pytest.raises(TransactionLost, match=r"commit has been under way 120 s while the brok"):
        publisher.check_stalled(brokers_answering_s=STALLED_S)
    assert producer.committed == [] and publisher.give_up() == 3  # the next term resends


def test_a_commit_that_ends_is_never_called_stuck() -> None:
    clock = [0.0]
    publisher, producer = _publisher(["wait", "wait", "ok"], now=lambda: clock[0])
    publisher.publish(_records(1, 2))
    publisher.poll(0)
    clock[0] += STALLED_S - 1
    publisher.check_stalled(brokers_answering_s=3600.0)
    publisher.poll(0)
    publisher.poll(0)  # committed
    assert producer.committed == [1, 2]
    clock[0] += 3600.0
    publisher.check_stalled(brokers_answering_s=3600.0)  # nothing under way: nothing stuck
    publisher.publish(_records(3, 1))
    publisher.poll(0)  # a new commit: its own clock
    publisher.check_stalled(brokers_answering_s=3600.0)
    assert producer.committed == [1, 2, 3]


def test_a_transaction_commits_once_its_first_record_has_waited_the_interval() -> None:
    clock = [0.0]
    publisher, producer = _publisher([], now=lambda: clock[0], interval_s=0.1)
    publisher.publish(_records(1, 2))
    assert publisher.due_in() == pytest.approx(0.1)
    clock[0] += 0.06
    publisher.publish(_records(3, 1))  # into the same transaction: its clock is the first's
    publisher.poll(0)
    assert producer.committed == [] and publisher.due_in() == pytest.approx(0.04)
    clock[0] += 0.04
    publisher.poll(0)
    assert producer.committed == [1, 2, 3] and publisher.acked_through == 3
    assert publisher.due_in() is None, "nothing held: the loop need not come back for it"


def test_a_full_transaction_commits_at_once_whatever_the_interval() -> None:
    made: list[TransactionalProducer] = []

    def factory(config: dict[str, Any]) -> TransactionalProducer:
        made.append(TransactionalProducer(config, []))
        return made[0]

    publisher = Publisher(KafkaConnection(bootstrap_servers="k"), "t", SingleObjectCodec().encode,
                          producer_factory=factory, transactional_id="tid",
                          end_in_background=False, commit_interval_s=3600.0,
                          commit_records=4, now=lambda: 0.0)  # fmt: skip
    publisher.publish(_records(1, 6))
    publisher.poll(0)  # four in the first, full: committed; the other two open the next
    assert made[0].committed == [1, 2, 3, 4] and publisher.acked_through == 4
    assert publisher.backlog == 2


class BlockingCommits(TransactionalProducer):
    """Each commit waits until the test lets it go, as Kafka's coordinator takes its time; a
    second end call while one is under way fails the test (librdkafka would refuse it)."""

    def __init__(self, config: dict[str, Any], ends: list[str]) -> None:
        super().__init__(config, ends)
        self.release = threading.Semaphore(0)
        self.ending = threading.Lock()

    def commit_transaction(self, timeout: float) -> None:
        assert self.ending.acquire(blocking=False), "two end calls at once"
        try:
            self.release.acquire()
            super().commit_transaction(timeout)
        finally:
            self.ending.release()

    def abort_transaction(self, timeout: float) -> None:
        assert self.ending.acquire(blocking=False), "two end calls at once"
        try:
            super().abort_transaction(timeout)
        finally:
            self.ending.release()


def _blocking_publisher(ends: list[str]) -> tuple[Publisher, BlockingCommits]:
    made: list[BlockingCommits] = []

    def factory(config: dict[str, Any]) -> BlockingCommits:
        made.append(BlockingCommits(config, ends))
        return made[0]

    publisher = Publisher(KafkaConnection(bootstrap_servers="k"), "t", SingleObjectCodec().encode,
                          producer_factory=factory, transactional_id="tid",
                          commit_interval_s=0.0)  # fmt: skip
    return publisher, made[0]


def _collected(publisher: Publisher) -> None:
    """The end in flight is over and its outcome taken (the loop's next turn)."""
    ending = publisher._ending
    assert ending is not None and ending.wait(30)
    publisher.poll(0)


def test_a_commit_runs_beside_the_loop_and_what_comes_meanwhile_waits_for_the_next() -> None:
    publisher, producer = _blocking_publisher([])
    publisher.publish(_records(1, 3))
    publisher.poll(0)  # the commit starts on its own thread; this turn is over at once
    assert publisher.due_in() is not None and producer.committed == []
    publisher.publish(_records(4, 2))  # logged while Kafka answers: not into that transaction
    publisher.poll(0)
    assert publisher.acked_through == 0 and producer.open[-1][0] == 3
    producer.release.release()
    _collected(publisher)
    assert producer.committed == [1, 2, 3] and publisher.acked_through == 3
    publisher.poll(0)  # the next transaction, of the two that waited: its commit starts
    producer.release.release()
    _collected(publisher)
    assert producer.committed == [1, 2, 3, 4, 5] and publisher.acked_through == 5
    assert publisher.backlog == 0


def test_stepping_down_waits_for_the_commit_under_way_and_counts_what_it_committed() -> None:
    publisher, producer = _blocking_publisher([])
    publisher.publish(_records(1, 3))
    publisher.poll(0)
    publisher.publish(_records(4, 2))
    producer.release.release()  # the commit under way makes it: those three are on Kafka
    assert publisher.give_up() == 2
    assert producer.committed == [1, 2, 3] and publisher.acked_through == 3


def test_a_fence_met_by_a_commit_on_its_own_thread_ends_the_term_in_the_loop() -> None:
    publisher, producer = _blocking_publisher(["fenced"])
    publisher.publish(_records(1, 2))
    publisher.poll(0)
    producer.release.release()
    with pytest.raises(Fenced, match=r"another daemon took transactional\.id tid"):
        _collected(publisher)
    producer.release.release()  # give_up's own end call (librdkafka refuses it: fenced)
    assert publisher.give_up() == 2


@settings(max_examples=40, deadline=None)
@given(
    ends=st.lists(st.sampled_from(["ok", "wait", "abort"]), max_size=20),
    batches=st.lists(st.integers(1, 40), min_size=1, max_size=10),
)
def test_with_commits_on_their_own_thread_every_record_is_committed_once_in_seq_order(
    ends: list[str], batches: list[int]
) -> None:
    publisher, producer = _publisher(list(ends), background=True)
    seq = 1
    for size in batches:
        publisher.publish(_records(seq, size))
        seq += size
        publisher.poll(0)
    for _ in range(4 * (len(ends) + len(batches)) + 5):
        if publisher._ending is not None:
            _collected(publisher)
        else:
            publisher.poll(0)
    assert producer.committed == list(range(1, seq))
    assert publisher.acked_through == seq - 1 and publisher.backlog == 0


def test_a_commit_that_ends_on_its_thread_while_the_loop_checks_it_is_no_failure() -> None:
    """The loop asked whether the commit was stuck while the commit's own thread finished it:
    its start time, there when checked, was gone when used, and the daemon died of a
    TypeError (a fault schedule's takeover)."""
    clock = [0.0]
    publisher, _ = _publisher(["wait", "ok"], now=lambda: clock[0])
    publisher.publish(_records(1, 2))
    publisher.poll(0)  # the commit under way
    txn = publisher._txn
    assert txn is not None and txn.ending_since is not None

    class EndsWhenRead:
        """`ending_since` as the loop sees it when the end finishes between two reads."""

        reads = 0

        def __get__(self, obj: Any, kind: Any = None) -> float | None:
            EndsWhenRead.reads += 1
            return 0.0 if EndsWhenRead.reads == 1 else None

        def __set__(self, obj: Any, value: Any) -> None:
            pass

    racing = type("Racing", (type(txn),), {"ending_since": EndsWhenRead()})
    txn.__class__ = racing
    clock[0] += 1.0
    publisher.check_stalled(brokers_answering_s=3600.0)  # no TypeError, nothing stalled
    assert EndsWhenRead.reads == 1, "read once, then used as read"
