"""The alert record of CONTRACT.md section 3."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
        return asdict(self)


def alert_id(cluster: str, rule: str, entity: str, started_ms: int) -> str:
    """Stable across replays: the same condition starting at the same event time."""
    return f"{cluster}:{rule}:{entity}:{started_ms}"
