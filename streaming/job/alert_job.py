"""The alert job's stateful step: the change records of each cluster through its AlertEngine,
kept in Spark's state store between micro-batches.

Records of one cluster arrive over several Kafka partitions (the key is cluster + path), so a
micro-batch can hold a later `seq` before an earlier one, and a backlog's partitions are read
unevenly. Records wait in the state until their place in `seq` order has come
(`streaming/rules/seq_order.py`: a watermark over the source's partitions), so the engine
sees the same sequence however the input was batched.

pyspark and pandas are imported inside the functions that run on Spark: every `zkcdc` command
loads this module, and their imports alone take about a second."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from zkcdc.ground.gc_pause import gc_paused
from zkcdc.streaming.job.change_source import RECORD_COLUMNS
from zkcdc.streaming.job.python_worker import ready_for_next_tasks
from zkcdc.streaming.job.saved_state import engine_blob, read_engine
from zkcdc.streaming.rules import engine_record
from zkcdc.streaming.rules.alert_engine import AlertEngine, Order
from zkcdc.streaming.rules.alert_records import Alert, json_text
from zkcdc.streaming.rules.engine_scope import leaders_of
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import OrderReport, SeqOrder
from zkcdc.streaming.rules.state_records import StateUpsert

# kind "alert": key = alert_id, with its status and event time (the sinks need no parsing);
# kind "state": key = state_records.state_key, json null = gone; kind "dead": a dead letter;
# kind "order": key = the cluster, json = its turn's placing figures (order_row).
OUTPUT_SCHEMA = "kind string, key string, json string, status string, at_ms long"
STATE_SCHEMA = "engine binary"


def drain(engine: AlertEngine, order: SeqOrder) -> list[Alert]:
    """Feeds the engine every waiting record whose place has come (seq_order.py)."""
    return [alert for _, alert in drain_ordered(engine, order)]


def drain_ordered(engine: AlertEngine, order: SeqOrder) -> list[tuple[Order, Alert]]:
    """`drain`, each alert with its place in the single engine's order (shard_stage.py)."""
    out: list[tuple[Order, Alert]] = []
    due: int | None = None  # engine.next_due(), asked for again only when a tick needs it
    for seq, (ts, op, path, events) in order.ready(engine.last_seq):
        if events == "[]" and engine.last_seq < seq:
            # A record with no events only moves time on (most of a shard's records are such
            # ticks): what process() would do, without its work.
            if due is None:
                due = engine.next_due()
            if ts < due or ts <= engine.now_ms:
                engine.last_seq, engine.now_ms = seq, max(engine.now_ms, ts)
                continue
            engine.last_seq = seq
            out += engine.advance_ordered(seq, ts)
            due = None
            continue
        if op == "LEAD":  # the cluster shard's view of ISR changes (engine_scope.leader_moves)
            out += engine.process_leaders(seq, ts, leaders_of(events))
            due = None
            continue
        record = {"seq": seq, "ts_ms": ts, "op": op, "path": path, "events": orjson.loads(events)}
        out += engine.process_ordered(record)
        due = None
    return out


def add_rows(order: SeqOrder, placed_through: int, batches: Iterator[Any]) -> None:
    """A micro-batch's rows of one group into its order (columns as RECORD_COLUMNS)."""
    for batch in batches:
        # Columns as Python lists: iterating pandas Series element by element costs more.
        for seq, partition, ts, op, path, events in zip(
            batch["seq"].tolist(), batch["partition"].tolist(), batch["ts_ms"].tolist(),
            batch["op"].tolist(), batch["path"].tolist(), batch["events"].tolist(), strict=True,
        ):  # fmt: skip
            order.add(
                int(seq), int(partition), (int(ts), str(op), str(path or ""), events or "[]"),
                placed_through,
            )  # fmt: skip


def order_row(cluster: str, report: OrderReport) -> dict[str, list[Any]]:
    """A turn's placing figures as an output row of kind "order" (key = the cluster)."""
    figures = {
        "gaps": report.gaps, "unproven": report.unproven, "unplaced": report.unplaced,
        "duplicates": report.duplicates, "waiting": report.waiting,
    }  # fmt: skip
    return {"kind": ["order"], "key": [cluster], "json": [orjson.dumps(figures).decode()],
            "status": [None], "at_ms": [None]}  # fmt: skip


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
    for batch in batches:  # pandas frames (the step's), or columns as lists (a take's)
        keys += list(batch["path"])
        letters += list(batch["events"])
    return {
        "kind": ["dead"] * len(keys),
        "key": keys,
        "json": letters,
        "status": [None] * len(keys),
        "at_ms": [None] * len(keys),
    }


def stateful_alerts(settings: RuleSettings, partitions: int = 1, with_state: bool = True) -> Any:
    """The function for `applyInPandasWithState`, grouped by cluster: alerts, and with
    `with_state` the state upserts of what each micro-batch changed. `partitions`: the
    source's (seq_order.py waits for each)."""

    schemas = engine_record.versions()  # read here, on the driver: a worker may not see avro/

    def run(key: tuple[Any, ...], batches: Iterator[Any], state: Any) -> Iterator[Any]:
        ready_for_next_tasks()
        engine_record.use(schemas)
        with gc_paused():
            yield from _run(key, batches, state)

    def _run(key: tuple[Any, ...], batches: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]

        if key[0] is None:
            yield pd.DataFrame(dead_letter_rows(batches), dtype=object)
            return
        cluster = str(key[0])
        if state.exists:
            engine, order = read_engine(bytes(state.get[0]), settings, partitions)
        else:
            engine, order = AlertEngine(cluster, settings), SeqOrder(partitions)
        add_rows(order, engine.last_seq, batches)
        alerts = drain(engine, order)
        states = engine.take_state() if with_state else engine.forget_changes()
        state.update((engine_blob(engine, order),))
        rows = output_rows(alerts, states)
        for column, values in order_row(cluster, order.take_report()).items():
            rows[column] += values
        yield pd.DataFrame(rows, dtype=object)

    return run


def alerts_stream(
    records: Any, settings: RuleSettings, partitions: int = 1, with_state: bool = True
) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    # The routing's typed events (change_source.ROUTING_EVENTS) are of no use to one group.
    return (
        records.select(*RECORD_COLUMNS)
        .groupBy("cluster")
        .applyInPandasWithState(
            stateful_alerts(settings, partitions, with_state),
            OUTPUT_SCHEMA,
            STATE_SCHEMA,
            "append",
            GroupStateTimeout.NoTimeout,
        )
    )
