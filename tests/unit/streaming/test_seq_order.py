"""The alert job's order (streaming/rules/seq_order.py through alert_job.drain_ordered, the
job's own code): the alerts of a cluster's records are those of a replay of the same records,
whatever the batches, the order the source's partitions are read in, the restarts, the
`--shards` layout, and with gaps, duplicates and heartbeats among the records."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.job.saved_state import engine_blob, read_engine, restored_order
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_scope import Scope, leaders_text
from zkcdc.streaming.rules.seq_order import SILENT_MS, SeqOrder
from zkcdc.streaming.rules.sharded_alerts import merged, shard_record

from .test_sharded_engine import QUICK, record_streams


def alert_lines(alerts: list[Any]) -> list[tuple[Any, ...]]:
    return [(a.alert_id, a.status, a.at_ms, a.as_text()) for a in alerts]


def captured(
    bodies: list[dict[str, Any]], partitions: int, round_every: int
) -> list[dict[str, Any]]:
    """The records as capture gives them out: a round of one heartbeat per partition after
    every `round_every` changes and at the end, seqs renumbered from 1, each with the
    partition capture's producer sends it to (a heartbeat: seq mod partitions; a change: by
    its path, as the key's hash does)."""
    out: list[dict[str, Any]] = []

    def give(record: dict[str, Any]) -> None:
        seq = len(out) + 1
        path = record["path"]
        partition = seq % partitions if not path else zlib.crc32(path.encode()) % partitions
        out.append({**record, "seq": seq, "partition": partition})

    def round_of_heartbeats(ts: int) -> None:
        for _ in range(partitions):
            give({"ts_ms": ts, "op": "HEARTBEAT", "path": "", "events": []})

    for i, body in enumerate(bodies, start=1):
        give(body)
        if i % round_every == 0:
            round_of_heartbeats(body["ts_ms"])
    round_of_heartbeats(bodies[-1]["ts_ms"] + 1)
    return out


@st.composite
def deliveries(draw: Any) -> tuple[list[dict[str, Any]], int]:
    """(what the topic holds, in produce order; partitions): capture's records with some
    never delivered (a dead letter, retention) and some delivered twice (a resend after a
    crash, later in the same partition). The last heartbeat round always arrives."""
    partitions = draw(st.integers(1, 4))
    records = captured(draw(record_streams()), partitions, draw(st.integers(1, 12)))
    tail = len(records) - partitions
    places = st.integers(0, max(0, tail - 1))
    lost = set(draw(st.lists(places, max_size=8))) if tail else set()
    twice = set(draw(st.lists(places, max_size=8))) if tail else set()
    kept: list[dict[str, Any]] = []
    for i, record in enumerate(records):
        if i not in lost:
            kept.append(record)
        if i in twice:
            # The resend comes a little later in the same partition.
            kept.insert(len(kept) + draw(st.integers(0, 3)), dict(record))
    return kept, partitions


def replayed(records: list[dict[str, Any]]) -> list[Any]:
    """`zkcdc replay LOG --alerts-out`'s alerts, by the contract: each distinct record once, in
    seq order, through one engine."""
    engine = AlertEngine("c", QUICK)
    alerts: list[Any] = []
    for _, record in sorted({r["seq"]: r for r in records}.items()):
        alerts += engine.process(record)
    return alerts


@dataclass
class Job:
    """The stateful step as Spark runs it: one engine and order per shard (one without
    `--shards`), kept between micro-batches, and what the sinks got."""

    partitions: int
    partition_shards: int
    state: list[bytes] = field(default_factory=list)
    delivered: list[Any] = field(default_factory=list)
    reports: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        shards = [None] if not self.partition_shards else range(self.partition_shards + 1)
        engines = [
            AlertEngine("c", QUICK, scope=None if s is None else Scope(s, self.partition_shards))
            for s in shards
        ]
        # Kept between micro-batches as the job keeps it: each shard's saved-state record.
        self.state = [engine_blob(e, SeqOrder(self.partitions)) for e in engines]

    def micro_batch(self, rows: list[dict[str, Any]]) -> tuple[list[bytes], list[Any]]:
        """The batch through every shard: (the state after it, its alerts merged)."""
        kept = [read_engine(blob, QUICK, self.partitions) for blob in self.state]
        placed: list[Any] = []
        for shard, (engine, order) in enumerate(kept):
            for row in rows:
                r = row
                if self.partition_shards:
                    r = shard_record(row, shard, self.partition_shards)
                lead = r["op"] == "LEAD"
                events = leaders_text(r["events"]) if lead else orjson.dumps(r["events"]).decode()
                waiting = (r["ts_ms"], r["op"], r["path"] or "", events)
                order.add(r["seq"], row["partition"], waiting, engine.last_seq)
            placed += drain_ordered(engine, order)
            self.reports.append(order.take_report())
        return [engine_blob(e, o) for e, o in kept], [a for _, a in merged(placed)]


def run_job(
    records: list[dict[str, Any]], partitions: int, partition_shards: int, data: Any
) -> Job:
    """Reads the topic as Spark's Kafka source would, in random micro-batches: from each
    partition with records left, at least one and at most a drawn number, in partition
    order; rows within a batch in any order. Between batches, at random, the job is killed
    and resumes from its last checkpoint: the killed batch's records are read again."""
    queues: list[list[dict[str, Any]]] = [[] for _ in range(partitions)]
    for record in records:
        queues[record["partition"]].append(record)
    job = Job(partitions, partition_shards)
    limit = data.draw(st.integers(1, 8), label="max records per partition and batch")
    while any(queues):
        taken = [q[: data.draw(st.integers(1, limit))] if q else [] for q in queues]
        rows = [r for part in taken for r in part]
        rows = data.draw(st.permutations(rows), label="rows")
        state, alerts = job.micro_batch(rows)
        if data.draw(st.integers(0, 9), label="kill") == 0:
            continue  # killed before the commit: nothing of the batch kept, read again
        job.state = state
        job.delivered += alerts
        for q, part in zip(queues, taken, strict=True):
            del q[: len(part)]
    return job


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)
@given(deliveries(), st.sampled_from([0, 0, 1, 2, 3]), st.data())
def test_alerts_are_the_replays_however_the_records_are_batched(
    delivered: tuple[list[dict[str, Any]], int], partition_shards: int, data: Any
) -> None:
    records, partitions = delivered
    job = run_job(records, partitions, partition_shards, data)
    assert alert_lines(job.delivered) == alert_lines(replayed(records))
    assert not any(r.unplaced or r.unproven for r in job.reports)
    engines = [read_engine(blob, QUICK, partitions) for blob in job.state]
    assert all(not order.pending for _, order in engines)


def test_the_old_rule_loses_what_a_backlog_read_in_small_batches_brings_late() -> None:
    """The case the order exists for: seq 2 sits in a partition the batch has not reached
    while later records span more event time than any fixed reorder bound."""
    order = SeqOrder(partitions=2)
    engine = AlertEngine("c", QUICK)
    order.add(1, 0, (1_000, "HEARTBEAT", "", "[]"), engine.last_seq)
    for seq in range(3, 40):
        order.add(seq, 0, (1_000 + seq * 1_000, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    assert engine.last_seq == 1  # 2 may still come from partition 1
    order.add(2, 1, (2_000, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    assert engine.last_seq == 39
    assert not order.take_report()


def test_a_gap_below_every_partitions_head_is_passed_and_counted() -> None:
    order = SeqOrder(partitions=2)
    engine = AlertEngine("c", QUICK)
    for seq, partition in ((1, 0), (2, 1), (4, 0), (5, 1)):
        order.add(seq, partition, (seq, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    report = order.take_report()
    assert engine.last_seq == 5
    assert (report.gaps, report.unproven, report.unplaced, report.waiting) == (1, 0, 0, 0)


def test_a_partition_that_says_nothing_is_left_out_after_a_while() -> None:
    """A partition that carries nothing of the cluster (a topic fed by something that sends
    no heartbeat to each partition) holds the order up for `SILENT_MS` of event time, not
    for good; a record it brings after its place was passed is counted, never alerted on."""
    order = SeqOrder(partitions=2)
    engine = AlertEngine("c", QUICK)
    order.add(1, 0, (0, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    ts = 0
    seq = 3
    while engine.last_seq < 3:
        ts += 5_000
        order.add(seq, 0, (ts, "HEARTBEAT", "", "[]"), engine.last_seq)
        seq += 1
        drain_ordered(engine, order)
        assert ts <= SILENT_MS + 10_000, "the silent partition held the order up for good"
    assert ts >= SILENT_MS
    report = order.take_report()
    assert report.unproven == 1 and report.gaps == 0
    order.add(2, 1, (1, "UPDATE", "/brokers/ids/1", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    assert order.take_report().unplaced == 1
    # Heard from again, it counts again: the next gap waits for it.
    order.add(seq + 1, 0, (ts + 1, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    assert engine.last_seq == seq - 1


def test_duplicates_are_counted_and_dropped() -> None:
    order = SeqOrder(partitions=1)
    engine = AlertEngine("c", QUICK)
    for seq in (1, 2, 2, 3):
        order.add(seq, 0, (seq, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    order.add(1, 0, (1, "HEARTBEAT", "", "[]"), engine.last_seq)
    report = order.take_report()
    assert (report.duplicates, report.unplaced, engine.last_seq) == (2, 0, 3)


def test_a_checkpoint_of_the_older_form_resumes_with_its_waiting_records() -> None:
    """Before the order, a checkpoint kept the waiting records as a dict by seq."""
    engine = AlertEngine("c", QUICK)
    engine.last_seq = 10
    order = restored_order({12: (5, "HEARTBEAT", "", "[]"), 13: (6, "HEARTBEAT", "", "[]")}, 3)
    assert sorted(order.pending) == [12, 13] and order.partitions == 3
    for partition in range(3):
        order.add(14 + partition, partition, (7, "HEARTBEAT", "", "[]"), engine.last_seq)
    drain_ordered(engine, order)
    assert engine.last_seq == 16
