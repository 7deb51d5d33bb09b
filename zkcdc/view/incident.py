"""An incident as a timeline to scrub through: change records run through the same pure rules
engine the Spark job runs, record by record, keeping what each one changed in the live state
(the state topic's upserts), the alerts it raised and its event rows. The state at any moment
is then the newest upsert per key up to it: what `zkcdc state show` shows after the alert job
read the same records."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.view.event_rows import rows
from zkcdc.view.group_assignment import with_expected


@dataclass(frozen=True)
class Step:
    """What one change record did, at its event time `t`."""

    t: int
    seq: int
    cluster: str
    upserts: list[tuple[str, dict[str, Any] | None]]
    alerts: list[dict[str, Any]]
    rows: list[dict[str, Any]]

    def as_json(self) -> list[Any]:
        return [self.t, self.seq, self.cluster, self.upserts, self.alerts, self.rows]


@dataclass
class Timeline:
    steps: list[Step] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)
    start_ms: int | None = None
    end_ms: int | None = None
    records: int = 0

    def state_at(self, t_ms: int) -> dict[str, dict[str, Any]]:
        """The newest value per state key from the steps up to `t_ms` (included)."""
        latest: dict[str, dict[str, Any]] = {}
        for step in self.steps:
            if step.t > t_ms:
                break
            for key, value in step.upserts:
                if value is None:
                    latest.pop(key, None)
                else:
                    latest[key] = value
        return latest

    def alerts_until(self, t_ms: int) -> list[dict[str, Any]]:
        return [a for step in self.steps if step.t <= t_ms for a in step.alerts]

    def as_json(self) -> dict[str, Any]:
        return {
            "clusters": self.clusters,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "records": self.records,
            "steps": [step.as_json() for step in self.steps],
        }


def build(records: Iterable[dict[str, Any]], settings: RuleSettings | None = None) -> Timeline:
    """The timeline of records (Avro-decoded dicts, in each cluster's `seq` order)."""
    timeline = Timeline()
    engines: dict[str, AlertEngine] = {}
    for record in records:
        cluster = record["cluster"]
        engine = engines.get(cluster)
        if engine is None:
            engine = engines[cluster] = AlertEngine(cluster, settings or RuleSettings())
            timeline.clusters.append(cluster)
        timeline.records += 1
        t = record["ts_ms"]
        timeline.start_ms = t if timeline.start_ms is None else min(timeline.start_ms, t)
        timeline.end_ms = t if timeline.end_ms is None else max(timeline.end_ms, t)
        alerts = [a.as_json() for a in engine.process(record)]
        upserts = [_shown(engine, key, value) for key, value in engine.take_state()]
        found = rows(record)
        if alerts or upserts or found:
            # At the engine's event time, which never goes back: a record stamped a little
            # earlier than one before it (a delete is stamped when seen) keeps its place.
            at = max(t, engine.now_ms)
            timeline.steps.append(Step(at, record["seq"], cluster, upserts, alerts, found))
    timeline.steps.sort(key=lambda s: s.t)  # stable: same-time steps keep record order
    return timeline


def _shown(
    engine: AlertEngine, key: str, value: dict[str, Any] | None
) -> tuple[str, dict[str, Any] | None]:
    """A group's view gets the range rebalance's owners beside its own (as `zkcdc ui` shows)."""
    if value is None or value.get("kind") != "group":
        return key, value
    return key, with_expected(value, lambda topic: len(engine.state.topics.get(topic, ())))
