"""The alert job's stateful step: the change records of each cluster through its AlertEngine,
kept in Spark's state store between micro-batches.

Records of one cluster arrive over several Kafka partitions (the key is cluster + path), so a
micro-batch can hold a later `seq` before an earlier one. Records wait in the state, in `seq`
order, until they are next in line; a gap (a seq that never comes, as after a capture restart
that skipped some) is passed once the waiting records span `reorder_ms` of event time.

pyspark and pandas are imported inside the functions that run on Spark: every `zkcdc` command
loads this module, and their imports alone take about a second."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import orjson

from zkcdc.ground.gc_pause import gc_paused
from zkcdc.streaming.job.python_worker import keep_zip_directories
from zkcdc.streaming.rules.alert_engine import AlertEngine, Order
from zkcdc.streaming.rules.alert_records import Alert, json_text
from zkcdc.streaming.rules.engine_scope import leaders_of
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.state_records import StateUpsert

# kind "alert": key = alert_id, with its status and event time (the sinks need no parsing);
# kind "state": key = state_records.state_key, json null = gone; kind "dead": a dead letter.
OUTPUT_SCHEMA = "kind string, key string, json string, status string, at_ms long"
STATE_SCHEMA = "engine binary"
REORDER_MS = 5_000

Pending = dict[int, tuple[int, str, str, str]]  # seq -> (ts_ms, op, path, events json)


def drain(engine: AlertEngine, pending: Pending, reorder_ms: int = REORDER_MS) -> list[Alert]:
    """Feeds the engine every waiting record that is next in line (or past a stale gap)."""
    return [alert for _, alert in drain_ordered(engine, pending, reorder_ms)]


def drain_ordered(
    engine: AlertEngine, pending: Pending, reorder_ms: int = REORDER_MS
) -> list[tuple[Order, Alert]]:
    """`drain`, each alert with its place in the single engine's order (shard_stage.py)."""
    out: list[tuple[Order, Alert]] = []
    for seq in [s for s in pending if s <= engine.last_seq]:
        del pending[seq]  # seen before a restart: the engine has them
    if not pending:
        return out
    newest_ts = max(ts for ts, _, _, _ in pending.values())
    due = engine.next_due()
    for seq in sorted(pending):
        ts, op, path, events = pending[seq]
        in_line = engine.last_seq < 0 or seq == engine.last_seq + 1
        if not in_line and newest_ts - ts < reorder_ms:
            break  # an earlier record may still come
        del pending[seq]
        if events == "[]" and engine.last_seq < seq:
            # A record with no events only moves time on (most of a shard's records are such
            # ticks): what process() would do, without its work.
            if ts < due or ts <= engine.now_ms:
                engine.last_seq, engine.now_ms = seq, max(engine.now_ms, ts)
                continue
            engine.last_seq = seq
            out += engine.advance_ordered(seq, ts)
            due = engine.next_due()
            continue
        if op == "LEAD":  # the cluster shard's view of ISR changes (engine_scope.leader_moves)
            out += engine.process_leaders(seq, ts, leaders_of(events))
            due = engine.next_due()
            continue
        record = {"seq": seq, "ts_ms": ts, "op": op, "path": path, "events": orjson.loads(events)}
        out += engine.process_ordered(record)
        due = engine.next_due()
    return out


def output_rows(alerts: list[Alert], states: list[StateUpsert]) -> dict[str, list[Any]]:
    return {
        "kind": ["alert"] * len(alerts) + ["state"] * len(states),
        "key": [a.alert_id for a in alerts] + [key for key, _ in states],
        "json": [a.as_text() for a in alerts]
        + [None if value is None else json_text(value) for _, value in states],
        "status": [a.status for a in alerts] + [None] * len(states),
        "at_ms": [a.at_ms for a in alerts] + [None] * len(states),
    }


def dead_letter_rows(batches: Iterator[Any]) -> dict[str, list[Any]]:
    """The dead letters' group (cluster null: change_source.changes_with_dead_letters) as
    output rows of kind "dead": key = the letter's place, json = the letter. No state."""
    keys: list[Any] = []
    letters: list[Any] = []
    for batch in batches:
        keys += batch["path"].tolist()
        letters += batch["events"].tolist()
    return {
        "kind": ["dead"] * len(keys),
        "key": keys,
        "json": letters,
        "status": [None] * len(keys),
        "at_ms": [None] * len(keys),
    }


def stateful_alerts(
    settings: RuleSettings, reorder_ms: int = REORDER_MS, with_state: bool = True
) -> Any:
    """The function for `applyInPandasWithState`, grouped by cluster: alerts, and with
    `with_state` the state upserts of what each micro-batch changed."""

    def run(key: tuple[Any, ...], batches: Iterator[Any], state: Any) -> Iterator[Any]:
        keep_zip_directories()  # for the worker's next tasks
        with gc_paused():
            yield from _run(key, batches, state)

    def _run(key: tuple[Any, ...], batches: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]

        if key[0] is None:
            yield pd.DataFrame(dead_letter_rows(batches), dtype=object)
            return
        cluster = str(key[0])
        if state.exists:
            engine, pending = pickle.loads(state.get[0])
        else:
            engine, pending = AlertEngine(cluster, settings), {}
        for batch in batches:
            # Columns as Python lists: iterating pandas Series element by element costs more.
            for seq, ts, op, path, events in zip(
                batch["seq"].tolist(), batch["ts_ms"].tolist(), batch["op"].tolist(),
                batch["path"].tolist(), batch["events"].tolist(), strict=True,
            ):  # fmt: skip
                pending[int(seq)] = (int(ts), str(op), str(path), events or "[]")
        alerts = drain(engine, pending, reorder_ms)
        states = engine.take_state() if with_state else []
        state.update((pickle.dumps((engine, pending), protocol=pickle.HIGHEST_PROTOCOL),))
        yield pd.DataFrame(output_rows(alerts, states), dtype=object)

    return run


def alerts_stream(
    records: Any, settings: RuleSettings, reorder_ms: int = REORDER_MS, with_state: bool = True
) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    return records.groupBy("cluster").applyInPandasWithState(
        stateful_alerts(settings, reorder_ms, with_state),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "append",
        GroupStateTimeout.NoTimeout,
    )
