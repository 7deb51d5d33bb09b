"""One cluster's alerting as shards (engine_scope.py), record by record: what the alert job's
stateful stage does across its tasks, in one process. Each record goes whole to the shards that
need it and as a tick (seq and event time) to the others; the shards' alerts, merged by their
place, are the single engine's.

The alert job runs one shard per Spark group; this class is the reference its tests hold it
to, and what a replay without Spark could use."""

from __future__ import annotations

from typing import Any

from zkcdc.streaming.rules.alert_engine import AlertEngine, Order
from zkcdc.streaming.rules.alert_records import Alert
from zkcdc.streaming.rules.engine_scope import (
    CLUSTER_SHARD,
    STATE_PATH,
    Scope,
    full_shards,
    leader_moves,
)
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.state_records import StateUpsert


def tick(record: dict[str, Any]) -> dict[str, Any]:
    """What a shard that needs nothing of a record gets of it."""
    return {"seq": record["seq"], "ts_ms": record["ts_ms"], "op": "TICK", "path": "", "events": []}


def shard_record(record: dict[str, Any], shard: int, partition_shards: int) -> dict[str, Any]:
    """A record as one shard gets it: whole, as a tick, or (the cluster shard, a record of ISR
    changes only) as its partitions' leaders, op LEAD."""
    if shard not in full_shards(record["path"] or "", partition_shards):
        return tick(record)
    moves = leader_moves(record["events"]) if shard == CLUSTER_SHARD else None
    if moves is None or not STATE_PATH.fullmatch(record["path"] or ""):
        return record
    return {**tick(record), "op": "LEAD", "events": moves}


class ShardedAlerts:
    def __init__(self, cluster: str, settings: RuleSettings, partition_shards: int) -> None:
        self.partition_shards = partition_shards
        self.engines = [
            AlertEngine(cluster, settings, scope=Scope(shard, partition_shards))
            for shard in range(partition_shards + 1)
        ]

    def process(self, record: dict[str, Any]) -> list[Alert]:
        return [alert for _, alert in self.process_ordered(record)]

    def process_ordered(self, record: dict[str, Any]) -> list[tuple[Order, Alert]]:
        out: list[tuple[Order, Alert]] = []
        for shard, engine in enumerate(self.engines):
            shards = shard_record(record, shard, self.partition_shards)
            if shards["op"] == "LEAD":
                out += engine.process_leaders(shards["seq"], shards["ts_ms"], shards["events"])
            else:
                out += engine.process_ordered(shards)
        return merged(out)

    def process_ordered_all(self, records: list[dict[str, Any]]) -> list[Alert]:
        return [alert for record in records for alert in self.process(record)]

    def take_state(self) -> list[StateUpsert]:
        return sorted(
            (upsert for engine in self.engines for upsert in engine.take_state()),
            key=lambda upsert: upsert[0],
        )


def merged(alerts: list[tuple[Order, Alert]]) -> list[tuple[Order, Alert]]:
    """Alerts of several shards in the single engine's order."""
    return sorted(alerts, key=lambda placed: placed[0])
