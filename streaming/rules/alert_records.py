"""The alert record (docs/reference/records.md, `Alert`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(frozen=True)
class Alert:
    alert_id: str
    rule: str
    severity: str
    status: str  # FIRING | RESOLVED
    cluster: str
    entity: str
    started_ms: int
    ended_ms: int | None
    summary: str
    details: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        # Field by field: dataclasses.asdict deep-copies recursively, ~4x the time, and a replay
        # can raise an alert for every other record.
        return {
            "alert_id": self.alert_id,
            "rule": self.rule,
            "severity": self.severity,
            "status": self.status,
            "cluster": self.cluster,
            "entity": self.entity,
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
            "summary": self.summary,
            "details": dict(self.details),
        }

    def as_text(self) -> str:
        """The alert as the sinks write it: JSON, keys sorted."""
        return json_text(self.as_json())

    @property
    def at_ms(self) -> int:
        """When it happened in event time: the start of a FIRING, the end of a RESOLVED."""
        return self.started_ms if self.ended_ms is None else self.ended_ms


def json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def alert_id(cluster: str, rule: str, entity: str, started_ms: int) -> str:
    """Stable across replays: the same condition starting at the same event time."""
    return f"{cluster}:{rule}:{entity}:{started_ms}"
