"""FIRING and RESOLVED from conditions over event time.

A level condition (a partition under-replicated) must hold for its for-duration before it
fires; it resolves when it stops holding. An instant condition (an unclean election) fires at
once and resolves after a hold, or later if it happens again meanwhile. Everything is driven by
the event time the caller passes in, never by a clock, so a replay at any speed gives the same
alerts."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from zkcdc.streaming.rules.alert_records import Alert, alert_id

Key = tuple[str, str]  # (rule, entity)
# What an alert says: (summary, details), asked for only while the condition holds, so the
# common case (an entity touched, nothing wrong) formats nothing.
Describe = Callable[[], tuple[str, dict[str, str]]]


@dataclass
class _Condition:
    severity: str
    summary: str
    details: dict[str, str]
    since_ms: int
    due_ms: int  # fires (level) or resolves (instant) at this event time
    firing: bool = False
    instant: bool = False


@dataclass
class AlertTracker:
    cluster: str
    conditions: dict[Key, _Condition] = field(default_factory=dict)
    # (due, key) of conditions that will fire or resolve later; entries whose condition went
    # or changed are skipped when they come up (cheaper than removing them).
    _due: list[tuple[int, Key]] = field(default_factory=list)

    def hold(
        self,
        rule: str,
        entity: str,
        active: bool,
        now_ms: int,
        severity: str,
        describe: Describe,
        for_ms: int,
    ) -> list[Alert]:
        """The level condition (rule, entity) holds (`active`) or not, as of `now_ms`."""
        key = (rule, entity)
        current = self.conditions.get(key)
        if current is None:
            if not active:
                return []
            summary, details = describe()
            current = _Condition(severity, summary, details, now_ms, now_ms + for_ms)
            self.conditions[key] = current
            if for_ms > 0:
                heapq.heappush(self._due, (current.due_ms, key))
            return self._fire_if_due(key, current, now_ms)
        if current.instant:
            return []  # an instant alert of the same key runs its own course
        if not active:
            del self.conditions[key]
            return [self._alert(key, current, "RESOLVED", now_ms)] if current.firing else []
        if not current.firing:
            current.summary, current.details = describe()
        return self._fire_if_due(key, current, now_ms)

    def instant(
        self,
        rule: str,
        entity: str,
        now_ms: int,
        severity: str,
        summary: str,
        details: dict[str, str],
        hold_ms: int,
    ) -> list[Alert]:
        key = (rule, entity)
        current = self.conditions.get(key)
        if current is not None and current.firing:
            current.due_ms = max(current.due_ms, now_ms + hold_ms)  # again: stays FIRING
            heapq.heappush(self._due, (current.due_ms, key))
            return []
        condition = _Condition(severity, summary, details, now_ms, now_ms + hold_ms, True, True)
        self.conditions[key] = condition
        heapq.heappush(self._due, (condition.due_ms, key))
        return [self._alert(key, condition, "FIRING", None)]

    def tick(self, now_ms: int) -> list[Alert]:
        """What the passing of event time up to `now_ms` fires and resolves."""
        return [alert for _, _, alert in self.tick_timed(now_ms)]

    def tick_timed(self, now_ms: int) -> list[tuple[int, Key, Alert]]:
        """`tick`, each alert with the (due, key) it came due at: the order the timers fired
        in, which shards of one cluster merge by (engine_scope.py)."""
        out: list[tuple[int, Key, Alert]] = []
        while self._due and self._due[0][0] <= now_ms:
            due, key = heapq.heappop(self._due)
            condition = self.conditions.get(key)
            if condition is None or condition.due_ms != due:
                continue  # gone, or its due time moved (a later entry stands for it)
            if condition.instant:
                del self.conditions[key]
                out.append((due, key, self._alert(key, condition, "RESOLVED", now_ms)))
            elif not condition.firing:
                out.extend((due, key, a) for a in self._fire_if_due(key, condition, now_ms))
        return out

    def next_due(self) -> int | None:
        """The earliest queued due time (a condition since gone or moved may stand here)."""
        return self._due[0][0] if self._due else None

    def firing(self) -> list[Key]:
        return [key for key, c in self.conditions.items() if c.firing]

    def _fire_if_due(self, key: Key, condition: _Condition, now_ms: int) -> list[Alert]:
        if condition.firing or now_ms < condition.due_ms:
            return []
        condition.firing = True
        return [self._alert(key, condition, "FIRING", None)]

    def _alert(self, key: Key, condition: _Condition, status: str, ended: int | None) -> Alert:
        rule, entity = key
        return Alert(
            alert_id=alert_id(self.cluster, rule, entity, condition.since_ms),
            rule=rule,
            severity=condition.severity,
            status=status,
            cluster=self.cluster,
            entity=entity,
            started_ms=condition.since_ms,
            ended_ms=ended,
            summary=condition.summary,
            details=dict(condition.details),
        )
