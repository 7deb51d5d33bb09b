"""Alerts to Prometheus Alertmanager (API v2) the way Prometheus sends them, so none vanishes.

Alertmanager resolves by itself an alert whose `endsAt` has passed, or, without one, that it
has not heard of for its `resolve_timeout` (5 min by default). So, as Prometheus does, every
FIRING alert is sent again every `resend_s` while it holds, with `endsAt` a few resends ahead:
it stays active as long as zkcdc runs, and ends by itself soon after zkcdc stops sending. A
RESOLVED alert is sent with its end until Alertmanager took it. A failed post is tried again
with backoff (the next post carries everything due), on a thread of its own, so an Alertmanager
that is down never holds up the alerts topic or the file. The alerts still due are saved to a
file (the job's checkpoint folder), so a restarted job goes on sending them."""

from __future__ import annotations

import datetime
import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zkcdc.ground import logs
from zkcdc.streaming.sinks.receiver import ReceiverHealth, SavedOutbox, SenderThread
from zkcdc.streaming.sinks.sink import AlertKey, AlertText

log = logs.get("zkcdc.alertmanager")

Post = Callable[[str, list[dict[str, Any]]], None]
ENDS_AFTER_RESENDS = 4  # Prometheus: endsAt = now + 4 x max(evaluation interval, resend delay)


def payload(alert: dict[str, Any]) -> dict[str, Any]:
    """One alert in Alertmanager's API v2 shape: labels identify it, annotations describe it."""
    labels = {
        "alertname": alert["rule"],
        "severity": alert["severity"],
        "cluster": alert["cluster"],
        "entity": alert["entity"],
        "alert_id": alert["alert_id"],
    }
    sent: dict[str, Any] = {
        "labels": labels,
        "annotations": {"summary": alert["summary"], **alert.get("details", {})},
        "startsAt": iso(alert["started_ms"]),
    }
    if alert["status"] == "RESOLVED" and alert.get("ended_ms") is not None:
        sent["endsAt"] = iso(alert["ended_ms"])
    return sent


def iso(ms: float) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def post_alerts(url: str, alerts: list[dict[str, Any]]) -> None:
    """POSTs to `url`/api/v2/alerts; raises OSError (URLError is one) when it did not take."""
    request = urllib.request.Request(
        url.rstrip("/") + "/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


class AlertmanagerNotifier:
    def __init__(
        self,
        url: str,
        *,
        resend_s: float = 60.0,
        state_file: Path | None = None,
        now: Callable[[], float] = time.time,
        post: Post = post_alerts,
        max_backoff_s: float = 30.0,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.url = url
        self.resend_s = resend_s
        self.max_backoff_s = max_backoff_s
        self._health = ReceiverHealth("alertmanager", url, max_backoff_s, jitter)
        self._outbox = SavedOutbox("alertmanager", state_file)
        self._now = now
        self._post = post
        self._lock = threading.Lock()
        self._firing: dict[str, dict[str, Any]] = {}  # alert_id -> payload, sent every resend
        self._resolved: dict[str, dict[str, Any]] = {}  # alert_id -> payload, until taken
        self._due = 0.0  # when the next post is due
        self._load()

    # -- fed by the job ----------------------------------------------------------------------
    def update(self, alerts: list[dict[str, Any]]) -> None:
        """The job's new alerts (parsed alert records), in event-time order: sent at once."""
        with self._lock:
            for alert in alerts:
                alert_id = alert["alert_id"]
                if alert["status"] == "FIRING":
                    self._firing[alert_id] = payload(alert)
                    self._resolved.pop(alert_id, None)
                else:
                    self._firing.pop(alert_id, None)
                    self._resolved[alert_id] = payload(alert)
            self._due = 0.0
            self._save()

    @property
    def pending(self) -> int:
        """Alerts still to be sent at least once more (firing ones always are)."""
        with self._lock:
            return len(self._firing) + len(self._resolved)

    # -- sending -------------------------------------------------------------------------------
    def send_due(self) -> float:
        """Posts what is due, if anything is; returns the seconds until the next post is due."""
        now = self._now()
        with self._lock:
            if now < self._due:
                return self._due - now
            ends = iso((now + ENDS_AFTER_RESENDS * self.resend_s) * 1000)
            batch = [{**p, "endsAt": ends} for p in self._firing.values()]
            resolved = dict(self._resolved)
        batch += resolved.values()
        if not batch:
            with self._lock:
                self._due = now + self.resend_s
            return self.resend_s
        try:
            self._post(self.url, batch)
        except (OSError, ValueError) as exc:
            with self._lock:
                wait = self._health.failed(str(exc))
                self._due = now + wait
            return wait
        with self._lock:
            taken = [a for a, sent in resolved.items() if self._resolved.get(a) is sent]
            for alert_id in taken:
                del self._resolved[alert_id]
            self._due = now + self.resend_s
            self._health.succeeded(sent=len(batch))
            # A resend of the same firing alerts changes nothing to keep; saving (an fsync)
            # on every one would hold the next resend up behind a busy disk.
            if taken:
                self._save()
        return self.resend_s

    def run(self, stop: threading.Event) -> None:
        """Sends until `stop` is set; woken early by new alerts."""
        while not stop.is_set():
            wait = self.send_due()
            stop.wait(min(wait, 0.5))

    # -- saved between runs --------------------------------------------------------------------
    def _save(self) -> None:
        self._outbox.save({"firing": self._firing, "resolved": self._resolved})

    def _load(self) -> None:
        saved = self._outbox.load()
        if saved is not None:
            self._firing = dict(saved.get("firing", {}))
            self._resolved = dict(saved.get("resolved", {}))


class AlertmanagerSink:
    name = "alertmanager"
    guarantee = (
        "each alert until Alertmanager took it: what is due is kept in the checkpoint and "
        "sent again after a restart (Alertmanager merges repeats by their labels)"
    )

    def __init__(
        self, url: str, resend_s: float, state_file: Path | None, max_backoff_s: float = 30.0
    ) -> None:
        notifier = AlertmanagerNotifier(
            url, resend_s=resend_s, state_file=state_file, max_backoff_s=max_backoff_s
        )
        self.notifier = notifier
        self._thread = SenderThread(notifier, "alertmanager")

    def deliver(self, alerts: list[AlertText]) -> None:
        if alerts:
            self.notifier.update([json.loads(a.text) for a in alerts])

    def delivered(self, since_ms: int) -> set[AlertKey] | None:
        return None  # sending one again is harmless: Alertmanager merges it

    def close(self) -> None:
        self._thread.close()
