"""A backlog taken whole (streaming/job/initial_state.py): the batch query's function over a
cluster's records, its shards' entries given to the job's step as Spark's initial state, and
the marker a kill at any step leaves for the next start. The step runs as Spark calls it, its
MapState a dict; the job's run over a real topic is test_replay.py's."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import orjson
import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.job import initial_state
from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.job.bucketed_map import NEW_BUCKETS
from zkcdc.streaming.job.change_source import DEAD_LETTER_OP, RECORD_COLUMNS
from zkcdc.streaming.job.initial_state import (
    EntriesOnTwoCores,
    InitialStateError,
    take_whole,
    taken,
    worth_taking,
)
from zkcdc.streaming.job.shard_stage import _processor_class
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.seq_order import SeqOrder

from .test_engine_split import (
    SOURCE_PARTITIONS,
    _batches,
    _source_partition,
    _waiting,
)
from .test_shard_stage import _Handle, assert_steps_go_on_as_the_single_engine
from .test_sharded_engine import QUICK, record_streams


def _frame(records: list[dict[str, Any]], cluster: str = "c") -> Any:
    rows = [(cluster, r["seq"], _source_partition(r), *_ordered(_waiting(r))) for r in records]
    return pd.DataFrame(rows, columns=list(RECORD_COLUMNS))


def _taken(frame: Any, partitions: int, shards: int, with_state: bool = False) -> Any:
    """The take's function over `frame` as one Arrow batch, as Spark's `mapInArrow` calls it;
    its rows as a frame of Python values."""
    function = take_whole(QUICK, partitions, shards, NEW_BUCKETS, with_state)
    out = list(function(iter([pa.RecordBatch.from_pandas(frame, preserve_index=False)])))
    assert all(batch.schema == initial_state.rows_schema() for batch in out)
    table = pa.Table.from_batches(out, schema=initial_state.rows_schema())
    return pd.DataFrame(table.to_pydict(), dtype=object)


def _ordered(waiting: tuple[int, str, str, str]) -> tuple[Any, ...]:
    ts, op, path, events = waiting  # as RECORD_COLUMNS name them: op, path, ts_ms, events
    return (op, path, ts, events)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.integers(1, 3), st.data())
def test_a_backlog_taken_whole_then_its_shards_give_the_single_engines_alerts(
    records: list[dict[str, Any]], n: int, data: st.DataObject
) -> None:
    batches = _batches(records)
    cut = data.draw(st.integers(0, len(batches)), label="cut")
    backlog = [r for batch in batches[:cut] for r in batch]
    out = _taken(_frame(backlog), SOURCE_PARTITIONS, n)
    assert list(out.columns) == [c.split()[0] for c in initial_state.ROWS_SCHEMA.split(", ")]
    single, order = AlertEngine("c", QUICK), SeqOrder(SOURCE_PARTITIONS)
    for r in backlog:
        order.add(r["seq"], _source_partition(r), _waiting(r), single.last_seq)
    taken_alerts = out[out["kind"] == "alert"]
    assert list(taken_alerts["json"]) == [a.as_text() for _, a in drain_ordered(single, order)]
    assert list(out["kind"]).count("order") == (1 if backlog else 0)  # no cluster: no rows
    steps = []
    for shard in range(n + 1):
        step = _processor_class()(QUICK, SOURCE_PARTITIONS, False, n, NEW_BUCKETS)
        step.init(_Handle())
        step.handleInitialState(("c", shard), out[out["shard"] == shard], None)
        steps.append(step)
    assert_steps_go_on_as_the_single_engine(steps, single, order, batches[cut:], n)


def test_the_dead_letters_are_passed_on_and_the_state_given_with_a_state_topic() -> None:
    letter = pd.DataFrame([(None, 7, 0, DEAD_LETTER_OP, "t/0/7", 0, '{"reason":"x"}')],
                          columns=list(RECORD_COLUMNS))  # fmt: skip
    out = _taken(letter, 1, 2, with_state=True)
    assert list(zip(out["kind"], out["key"], out["json"], strict=True)) == [
        ("dead", "t/0/7", '{"reason":"x"}')
    ]
    events = [{"type": EventType.BROKER_REGISTERED, "broker_id": 1}]
    broker = pd.DataFrame([("c", 1, 0, "READ", "/brokers/ids/1", 5, orjson.dumps(events).decode())],
                          columns=list(RECORD_COLUMNS))  # fmt: skip
    out = _taken(broker, 1, 2, with_state=True)
    assert list(out[out["kind"] == "state"]["key"]) == ["c/broker/1", "c/controller"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), record_streams(), st.data())
def test_clusters_and_dead_letters_read_mixed_in_batches_are_each_taken_as_alone(
    first: list[dict[str, Any]], second: list[dict[str, Any]], data: st.DataObject
) -> None:
    """The backlog comes in one task as read: the clusters' records and the dead letters
    interleaved, cut into Arrow batches anywhere."""
    letter = (None, 7, 0, DEAD_LETTER_OP, "t/0/7", 0, '{"reason":"x"}')
    # Each source partition's rows in their order, the partitions' rows interleaved anyhow.
    queues: dict[Any, list[Any]] = {}
    for row in [*_frame(first, "a").itertuples(index=False),
                *_frame(second, "b").itertuples(index=False), letter]:  # fmt: skip
        queues.setdefault((row[0], row[2]), []).append(tuple(row))
    mixed = []
    while queues:
        place = data.draw(st.sampled_from(sorted(queues, key=repr)), label="read from")
        mixed.append(queues[place].pop(0))
        if not queues[place]:
            del queues[place]
    cuts = sorted(data.draw(st.sets(st.integers(1, len(mixed) - 1)), label="batch ends"))
    frame = pd.DataFrame(mixed, columns=list(RECORD_COLUMNS), dtype=object)
    frame[["seq", "partition", "ts_ms"]] = frame[["seq", "partition", "ts_ms"]].astype("int64")
    function = take_whole(QUICK, SOURCE_PARTITIONS, 2, NEW_BUCKETS, True)
    batches = [pa.RecordBatch.from_pandas(frame.iloc[a:b], preserve_index=False)
               for a, b in zip([0, *cuts], [*cuts, len(mixed)], strict=True)]  # fmt: skip
    out = pa.Table.from_batches(list(function(iter(batches))), schema=initial_state.rows_schema())
    together = pd.DataFrame(out.to_pydict(), dtype=object)
    # Each cluster's rows alone, in the order they were read.
    alone = [_taken(frame[frame["cluster"] == cluster], SOURCE_PARTITIONS, 2, with_state=True)
             for cluster in ("a", "b")]  # fmt: skip
    dead = together[together["kind"] == "dead"]
    assert list(zip(dead["key"], dead["json"], strict=True)) == [("t/0/7", '{"reason":"x"}')]
    got = sorted(map(repr, together.itertuples(index=False)))
    want = sorted(map(repr, pd.concat([dead, *alone]).itertuples(index=False)))
    assert got == want, (len(got), len(want), [r[:200] for r in set(got) ^ set(want)][:6])


def _marker(checkpoint: Path, **data: Any) -> None:
    folder = checkpoint / initial_state.FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    whole = {"version": 1, "topic": "t", "shards": 2, "ends": {"0": 5}, "rows_written": True}
    (folder / "taken.json").write_text(json.dumps({**whole, **data}))


def test_a_start_goes_on_from_the_last_step_a_kill_left(tmp_path: Path) -> None:
    assert taken(tmp_path, "t", 2) is None  # never taken
    _marker(tmp_path, rows_written=False)
    assert taken(tmp_path, "t", 2) is None  # cut short: taken again
    _marker(tmp_path)
    found = taken(tmp_path, "t", 2)
    assert found is not None and found.ends == {0: 5}
    assert json.loads(found.starting_offsets()) == {"t": {"0": 5}}


@pytest.mark.parametrize(
    ("written", "said"),
    [("{not json", "cannot be read"), (json.dumps({"version": 9}), "not version 1"),
     (None, "taken from topic t for 2 shards, not u for 3")],
)  # fmt: skip
def test_a_marker_that_cannot_be_used_is_refused_in_one_line(
    tmp_path: Path, written: str | None, said: str
) -> None:
    _marker(tmp_path)
    if written is not None:
        (tmp_path / initial_state.FOLDER / "taken.json").write_text(written)
    with pytest.raises(InitialStateError, match=said):
        taken(tmp_path, "u" if written is None else "t", 3 if written is None else 2)


def test_only_a_new_checkpoint_far_enough_behind_takes_its_backlog(tmp_path: Path) -> None:
    assert worth_taking(tmp_path, 100, 100)
    assert not worth_taking(tmp_path, 99, 100)
    assert not worth_taking(tmp_path, None, 100)  # Kafka could not say
    assert not worth_taking(tmp_path, 10**9, 0)  # never
    (tmp_path / "alerts" / "offsets").mkdir(parents=True)
    (tmp_path / "alerts" / "offsets" / "0").write_text("v1\n{}\n{}")
    assert not worth_taking(tmp_path, 10**9, 100)  # its query planned a micro-batch already


def test_the_takes_placing_figures_are_reported_once_not_again_by_its_shards() -> None:
    """A gap passed in the backlog is in the take's figures; the shards it hands on start
    with none, so the query's first micro-batch does not count it again."""
    records = [{"seq": seq, "ts_ms": seq, "op": "HEARTBEAT", "path": "", "events": []}
               for seq in (1, 2, 4)]  # fmt: skip
    frame = _frame(records)
    frame["partition"] = 0
    out = _taken(frame, 1, 2)
    assert orjson.loads(out[out["kind"] == "order"]["json"].iloc[0])["gaps"] == 1
    step = _processor_class()(QUICK, 1, False, 2, NEW_BUCKETS)
    step.init(_Handle())
    step.handleInitialState(("c", 0), out[out["shard"] == 0], None)
    later = pd.DataFrame([(5, 0, 5, "HEARTBEAT", "", "[]")],
                         columns=["seq", "partition", "ts_ms", "op", "path", "events"])  # fmt: skip
    (rows,) = step.handleInputRows(("c", 0), iter([later]), None)
    assert orjson.loads(rows[rows["kind"] == "order"]["json"].iloc[0])["gaps"] == 0


def _drained(records: list[dict[str, Any]]) -> tuple[AlertEngine, SeqOrder]:
    engine, order = AlertEngine("c", QUICK), SeqOrder(SOURCE_PARTITIONS)
    for r in records:
        order.add(r["seq"], _source_partition(r), _waiting(r), engine.last_seq)
    drain_ordered(engine, order)
    engine.changed = set()  # as the take hands it over: no changes to pass on
    return engine, order


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.integers(1, 3))
def test_the_shards_entries_are_the_same_with_or_without_a_forked_writer(
    records: list[dict[str, Any]], n: int
) -> None:
    """Where there is a fork, a copy of the process cuts and writes the partition shards; where
    there is none, the process itself: the same entries."""
    engine, order = _drained(records)
    forked = EntriesOnTwoCores(engine, order, n, NEW_BUCKETS).result()
    with pytest.MonkeyPatch.context() as patch:
        patch.delattr(initial_state.os, "fork")
        alone = EntriesOnTwoCores(engine, order, n, NEW_BUCKETS).result()
    assert forked == alone
    assert {shard for shard, *_ in forked} == set(range(n + 1))


def test_a_take_that_fails_after_the_fork_ends_its_forked_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy, left with no reader once the take fails (its pipe full), would otherwise wait
    in the worker for as long as the worker lives."""
    parent, forked = os.getpid(), []
    fork = os.fork

    def recorded_fork() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    def stored_entries(*args: Any) -> Any:
        if os.getpid() != parent:
            signal.pause()  # the copy at work, as long as it is let
        return written(*args)

    written = initial_state.stored_entries
    monkeypatch.setattr(initial_state.os, "fork", recorded_fork)
    monkeypatch.setattr(initial_state, "stored_entries", stored_entries)
    engine, order = _drained([])
    with (
        pytest.raises(RuntimeError, match="the upserts failed"),
        EntriesOnTwoCores(engine, order, 2, NEW_BUCKETS),
    ):
        raise RuntimeError("the upserts failed")
    (pid,) = forked
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(pid, os.WNOHANG)


def test_a_forked_writer_that_fails_fails_the_take_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parent = os.getpid()

    def stored_entries(*args: Any) -> Any:
        if os.getpid() != parent:
            raise MemoryError("the copy ran out")
        return written(*args)

    written = initial_state.stored_entries
    monkeypatch.setattr(initial_state, "stored_entries", stored_entries)
    engine, order = _drained([])
    with pytest.raises(InitialStateError, match=r"forked writer .* failed \(exit 1\)") as err:
        EntriesOnTwoCores(engine, order, 2, NEW_BUCKETS).result()
    assert "\n" not in str(err.value)
