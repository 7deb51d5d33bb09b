"""`zkcdc alerts tail`: the alerts topic in a terminal, one coloured line an alert (or JSON
lines), filtered by cluster, rule, status and event time; `--follow` keeps reading."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text

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
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
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


def parse(value: bytes | None) -> dict[str, Any] | None:
    """An alert record, or None for a value that is not one (the topic is anyone's to write)."""
    try:
        alert = json_values.loads(value or b"")
    except ValueError:
        return None
    return alert if isinstance(alert, dict) and "alert_id" in alert else None


def tail(
    follower: TopicFollower,
    keep: AlertFilter,
    show: Callable[[dict[str, Any]], None],
    follow: bool,
    stop: threading.Event,
) -> int:
    """Shows every kept alert; without `follow` stops at the end the topic had at the start.
    Returns how many were shown."""
    shown = 0
    while not stop.is_set():
        if not follow and follower.caught_up:
            break
        for message in follower.poll(0.5):
            alert = parse(message.value())
            if alert is not None and keep(alert):
                show(alert)
                shown += 1
    return shown
