"""What a scenario did and which change events and alerts it should cause: printed for the
operator, written as JSON (`--expect FILE`) for tests and alert rehearsals."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkcdc.ground.change_types import EventType
from zkcdc.ground.private_files import atomic_write
from zkcdc.simulate.alert_forecast import AlertForecast
from zkcdc.streaming.rules.rule_settings import RuleSettings

# A broker failure on a big cluster touches ~100k partitions: list a sample, count them all.
_LISTED_PER_TYPE = 25


@dataclass
class Expectation:
    scenario: str
    did: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    forecast: AlertForecast = field(
        default_factory=lambda: AlertForecast(RuleSettings(), lambda: 0)
    )
    event_counts: Counter[str] = field(default_factory=Counter)
    hold_ms: int = 0  # how long the run keeps the cluster as it is after the scenario

    def step(self, line: str) -> None:
        self.did.append(line)

    def event(
        self, event_type: EventType, path: str, together: bool = False, **fields: Any
    ) -> None:
        """A change record at `path` should carry an event of `event_type` with these fields.
        `together`: made by the same ZooKeeper transaction as the event before (a session
        closing deletes all its ephemeral znodes at once), so watchers may see the two in
        either order."""
        self.event_counts[event_type] += 1
        self.forecast.count(event_type, path, fields)
        if self.event_counts[event_type] <= _LISTED_PER_TYPE:
            listed = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
            entry = {"type": event_type, "path": path, **listed}
            if together:
                entry["together"] = True
            self.events.append(entry)

    def condition(self, rule: str, entity: str, active: bool) -> None:
        """A level condition of `rule` holds for `entity` from now on, or ends now."""
        self.forecast.condition(rule, entity, active)

    def instant(self, rule: str, entity: str) -> None:
        self.forecast.instant(rule, entity)

    @property
    def alerts(self) -> list[dict[str, str]]:
        return self.forecast.alerts(self.hold_ms)

    def as_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "did": self.did,
            "events": self.events,
            "event_counts": dict(sorted(self.event_counts.items())),
            "alerts": self.alerts,
        }

    def write(self, path: Path) -> None:
        atomic_write(path, json.dumps(self.as_json(), indent=2) + "\n")

    def summary(self) -> list[str]:
        lines = [f"scenario {self.scenario}:"]
        lines += [f"  did: {line}" for line in self.did]
        counts = ", ".join(f"{t} x{n}" for t, n in sorted(self.event_counts.items()))
        lines.append(f"  expect events: {counts or 'none'}")
        alerts = ", ".join(f"{a['rule']} ({a['entity']})" for a in self.alerts[:10])
        more = f" and {len(self.alerts) - 10} more" if len(self.alerts) > 10 else ""
        lines.append(f"  expect alerts: {alerts or 'none'}{more}")
        return lines
