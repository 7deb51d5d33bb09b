"""`zkcdc alerts tail`: the alerts topic in a terminal, one coloured line an alert (or JSON
lines), filtered by cluster, rule, status and event time; `--follow` keeps reading."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.view import json_values
from zkcdc.view.topic_follower import TopicFollower

STYLES = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


@dataclass(frozen=True)
class AlertFilter:
    clusters: frozenset[str] = frozenset()
    rules: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    since_ms: int | None = None  # event time: a FIRING's start, a RESOLVED's end

    def __call__(self, alert: dict[str, Any]) -> bool:
        if self.clusters and alert.get("cluster") not in self.clusters:
            return False
        if self.rules and alert.get("rule") not in self.rules:
            return False
        if self.statuses and alert.get("status") not in self.statuses:
            return False
        if self.since_ms is not None:
            at = alert.get("ended_ms") if alert.get("status") == "RESOLVED" else None
            at = at if at is not None else alert.get("started_ms")
            return isinstance(at, int) and at >= self.since_ms
        return True


def iso_ms(ms: int | None) -> str:
    if ms is None:
        return "-"
    try:
        moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    except (OverflowError, ValueError, OSError):  # past year 9999: shown as the number it is
        return str(ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alert_line(alert: dict[str, Any]) -> Text:
    """One alert as a terminal line: time, status, severity, rule, cluster, entity, summary."""
    resolved = alert.get("status") == "RESOLVED"
    at = alert.get("ended_ms") if resolved else alert.get("started_ms")
    style = "green" if resolved else STYLES.get(str(alert.get("severity")), "")
    line = Text(f"{iso_ms(at)} ")
    line.append(f"{alert.get('status', '?'):<8} ", style=style)
    line.append(f"{alert.get('severity', '?'):<8} ", style=style)
    line.append(f"{alert.get('rule', '?'):<28} ", style="bold")
    line.append(f"{alert.get('cluster', '?')} {alert.get('entity', '?')}  ")
    line.append(str(alert.get("summary", "")))
    return line


FIELDS = ("alert_id", "rule", "severity", "status", "cluster", "entity", "summary")
LONG = 2**63


def alert_record(value: bytes | None) -> dict[str, Any]:
    """An alert record as docs/reference/records.md has it; ValueError for anything else (the topic
    is anyone's to write)."""
    alert = json_values.loads(value or b"")
    if not isinstance(alert, dict):
        raise ValueError(f"a {type(alert).__name__}, not a JSON object")
    for name in FIELDS:
        if not isinstance(alert.get(name), str):
            raise ValueError(f"field {name} is {str(alert.get(name))[:40]!r}, not a string")
    if not alert["alert_id"] or alert["status"] not in ("FIRING", "RESOLVED"):
        raise ValueError(f"no alert_id, or status {alert['status'][:20]!r}")
    for name in ("started_ms", "ended_ms"):
        at = alert.get(name)
        if at is not None and not (isinstance(at, int) and not isinstance(at, bool)
                                   and -LONG <= at < LONG):  # fmt: skip
            raise ValueError(f"field {name} is {str(at)[:40]!r}, not a time in ms")
    details = alert.get("details")
    if details is not None and not (
        isinstance(details, dict) and all(isinstance(v, str) for v in details.values())
    ):
        raise ValueError("details is no string map")
    return {k: alert.get(k) for k in (*FIELDS, "started_ms", "ended_ms", "details")}


def parse(value: bytes | None) -> dict[str, Any] | None:
    """An alert record, or None for a value that is not one."""
    try:
        return alert_record(value)
    except ValueError:
        return None


def alert_of(message: Any) -> dict[str, Any]:
    return alert_record(message.value())


def tail(
    follower: TopicFollower,
    keep: AlertFilter,
    show: Callable[[dict[str, Any]], None],
    follow: bool,
    stop: threading.Event,
    skipped: UnreadableMessages | None = None,
) -> int:
    """Shows every kept alert; without `follow` stops at the end the topic had at the start.
    Returns how many were shown; a message that is no alert is counted in `skipped`."""
    unreadable = skipped if skipped is not None else UnreadableMessages("alerts tail")
    shown = 0
    while not stop.is_set():
        if not follow and follower.caught_up:
            break
        for message in follower.poll(0.5):
            alert = unreadable.read(message, alert_of)
            if alert is not None and keep(alert):
                show(alert)
                shown += 1
    return shown
