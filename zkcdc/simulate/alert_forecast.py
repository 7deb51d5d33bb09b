"""Which alerts a scenario should cause under given rule settings, from what the simulator did
and when: conditions it opened and closed (a broker down, a partition under-replicated) with
their wall-clock times, instant incidents, and counts of changes for the window rules.

This is the scenario's own account, kept independently of the alert engine: a test compares
the two. A condition fires if it lasts its rule's for-duration; one still open when the
scenario ends is taken to last through the run's `--hold` as well."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.rules.rule_catalog import SEVERITY
from zkcdc.streaming.rules.rule_settings import RuleSettings

Key = tuple[str, str]  # (rule, entity)


def window_key(event_type: EventType, path: str, fields: dict[str, object]) -> Key | None:
    """The window rule a change event counts for, as the alert rules count it."""
    if event_type in (EventType.ISR_SHRUNK, EventType.ISR_EXPANDED):
        parts = path.split("/")  # /brokers/topics/T/partitions/P/state
        return ("isr_flapping", f"{parts[3]}/{parts[5]}")
    if event_type == EventType.LEADER_CHANGED:
        return ("leader_election_storm", "cluster")
    if event_type == EventType.CONTROLLER_ELECTED:
        return ("controller_flapping", "controller")
    if event_type in (EventType.BROKER_REGISTERED, EventType.BROKER_DEREGISTERED):
        return ("broker_flapping", f"broker/{fields['broker_id']}")
    return None


@dataclass
class AlertForecast:
    settings: RuleSettings
    now_ms: Callable[[], int]
    _open: dict[Key, int] = field(default_factory=dict)
    _fired: dict[Key, None] = field(default_factory=dict)  # ordered set: 100k keys happen
    _counts: Counter[Key] = field(default_factory=Counter)

    def condition(self, rule: str, entity: str, active: bool) -> None:
        key = (rule, entity)
        now = self.now_ms()
        if active and key not in self._open:
            self._open[key] = now
        elif not active and key in self._open:
            start = self._open.pop(key)
            if now - start >= self._for_ms(rule):
                self._fire(key)

    def instant(self, rule: str, entity: str) -> None:
        self._fire((rule, entity))

    def count(self, event_type: EventType, path: str, fields: dict[str, object]) -> None:
        key = window_key(event_type, path, fields)
        if key is None:
            return
        self._counts[key] += 1
        threshold = getattr(self.settings, f"{key[0]}_changes")
        if self._counts[key] >= threshold:
            self._fire(key)

    def alerts(self, hold_ms: int) -> list[dict[str, str]]:
        """Every alert expected to fire by the end of the hold that follows the scenario."""
        end = self.now_ms() + hold_ms
        fired = dict(self._fired)
        for key, start in self._open.items():
            if end - start >= self._for_ms(key[0]):
                fired.setdefault(key)
        return [{"rule": r, "entity": e, "severity": SEVERITY[r]} for r, e in fired]

    def _for_ms(self, rule: str) -> int:
        value: int = getattr(self.settings, f"{rule}_for_ms")
        return value

    def _fire(self, key: Key) -> None:
        self._fired.setdefault(key)
