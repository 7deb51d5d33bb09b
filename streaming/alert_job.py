"""The alert job's stateful step: the change records of each cluster through its AlertEngine,
kept in Spark's state store between micro-batches.

Records of one cluster arrive over several Kafka partitions (the key is cluster + path), so a
micro-batch can hold a later `seq` before an earlier one. Records wait in the state, in `seq`
order, until they are next in line; a gap (a seq that never comes, as after a capture restart
that skipped some) is passed once the waiting records span `reorder_ms` of event time."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

from streaming.alert_engine import AlertEngine
from streaming.alert_records import Alert
from streaming.rule_settings import RuleSettings

OUTPUT_SCHEMA = (
    "alert_id string, rule string, severity string, status string, cluster string, "
    "entity string, started_ms long, ended_ms long, json string"
)
STATE_SCHEMA = "engine binary"
REORDER_MS = 5_000

Pending = dict[int, tuple[int, str, str, str]]  # seq -> (ts_ms, op, path, events json)


def drain(engine: AlertEngine, pending: Pending, reorder_ms: int = REORDER_MS) -> list[Alert]:
    """Feeds the engine every waiting record that is next in line (or past a stale gap)."""
    out: list[Alert] = []
    for seq in [s for s in pending if s <= engine.last_seq]:
        del pending[seq]  # seen before a restart: the engine has them
    if not pending:
        return out
    newest_ts = max(ts for ts, _, _, _ in pending.values())
    for seq in sorted(pending):
        ts, op, path, events = pending[seq]
        in_line = engine.last_seq < 0 or seq == engine.last_seq + 1
        if not in_line and newest_ts - ts < reorder_ms:
            break  # an earlier record may still come
        del pending[seq]
        record = {"seq": seq, "ts_ms": ts, "op": op, "path": path, "events": json.loads(events)}
        out += engine.process(record)
    return out


def alert_row(alert: Alert) -> dict[str, Any]:
    return {
        "alert_id": alert.alert_id,
        "rule": alert.rule,
        "severity": alert.severity,
        "status": alert.status,
        "cluster": alert.cluster,
        "entity": alert.entity,
        "started_ms": alert.started_ms,
        "ended_ms": alert.ended_ms,
        "json": json.dumps(alert.as_json(), sort_keys=True),
    }


def stateful_alerts(settings: RuleSettings, reorder_ms: int = REORDER_MS) -> Any:
    """The function for `applyInPandasWithState`, grouped by cluster."""

    def run(key: tuple[Any, ...], batches: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd  # type: ignore[import-untyped]

        cluster = str(key[0])
        if state.exists:
            engine, pending = pickle.loads(state.get[0])
        else:
            engine, pending = AlertEngine(cluster, settings), {}
        for batch in batches:
            for seq, ts, op, path, events in zip(
                batch["seq"], batch["ts_ms"], batch["op"], batch["path"], batch["events"],
                strict=True,
            ):  # fmt: skip
                pending[int(seq)] = (int(ts), str(op), str(path), events or "[]")
        alerts = drain(engine, pending, reorder_ms)
        state.update((pickle.dumps((engine, pending), protocol=pickle.HIGHEST_PROTOCOL),))
        rows = [alert_row(a) for a in alerts]
        frame = pd.DataFrame(rows, columns=[c.split()[0] for c in OUTPUT_SCHEMA.split(", ")])
        # Nullable integers: a FIRING's ended_ms is null, not NaN.
        yield frame.astype({"started_ms": "Int64", "ended_ms": "Int64"})

    return run


def alerts_stream(records: Any, settings: RuleSettings, reorder_ms: int = REORDER_MS) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    return records.groupBy("cluster").applyInPandasWithState(
        stateful_alerts(settings, reorder_ms),
        OUTPUT_SCHEMA,
        STATE_SCHEMA,
        "append",
        GroupStateTimeout.NoTimeout,
    )
