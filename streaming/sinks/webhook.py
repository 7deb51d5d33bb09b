"""`--webhook URL`: every alert POSTed to an HTTP receiver, in event-time order, none lost.

Each alert is put in an outbox kept in the job's checkpoint folder before `deliver` returns;
a thread of its own POSTs the outbox oldest first, one alert a request, and takes an alert out
only once the receiver answered 2xx. A receiver that is down, slow or answering 5xx/408/429 is
tried again with backoff (a random wait up to 1 s, the cap doubling to 30 s) for as long as it takes, so an outage loses
nothing and never holds up the other sinks; a restarted job goes on with the saved outbox.
A receiver's other 4xx answer is final for that alert (it will never take it): logged, dropped.

Payloads: `json`, the alert record itself (docs/reference/records.md; a receiver dedupes on
`alert_id` + `status`); `slack`, Slack's incoming-webhook shape (`{"text": ...}`), which
Mattermost, Rocket.Chat and Teams' Slack-compatible hooks take too.

Webhook URLs often carry their secret (Slack's do): only the scheme and host are ever logged."""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from zkcdc.ground import logs
from zkcdc.streaming.sinks.receiver import ReceiverHealth, SavedOutbox, SenderThread
from zkcdc.streaming.sinks.sink import AlertKey, AlertText

log = logs.get("zkcdc.webhook")

PayloadFormat = Literal["json", "slack"]
FORMATS: tuple[PayloadFormat, ...] = ("json", "slack")
Post = Callable[[str, bytes], int]  # (url, body) -> HTTP status; raises OSError when unreachable
SENT_KEPT_S = 3600.0  # what was sent is remembered this long, so a re-run batch skips it
_RETRIED = {408, 425, 429}

_MARKS = {("FIRING", "critical"): ":red_circle:", ("FIRING", "warning"): ":large_orange_circle:"}


def slack_text(alert: dict[str, Any]) -> str:
    mark = _MARKS.get((alert["status"], alert["severity"]), ":white_check_mark:")
    if alert["status"] == "FIRING" and alert["severity"] == "info":
        mark = ":large_blue_circle:"
    return (
        f"{mark} *{alert['status']}* {alert['severity']} `{alert['rule']}` "
        f"{alert['cluster']} {alert['entity']}: {alert['summary']}"
    )


def body_of(alert_text: str, payload: PayloadFormat) -> bytes:
    if payload == "json":
        return alert_text.encode()
    return json.dumps({"text": slack_text(json.loads(alert_text))}).encode()


def post_json(url: str, body: bytes) -> int:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def webhook_url_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook's (one line that never shows its path), or None."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{shown(url)!r} is not an http:// or https:// URL"
    return None


def shown(url: str) -> str:
    """The URL as logs may show it: scheme and host, never its path or query (a secret)."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is no number: nothing of it is shown
        port = ""
    if not parts.scheme or not parts.hostname:
        return "(not a URL)"
    return f"{parts.scheme}://{parts.hostname}{port}/…"


def state_file_for(checkpoint: Path, url: str) -> Path:
    return checkpoint / f"webhook-{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"


class WebhookNotifier:
    def __init__(
        self,
        url: str,
        payload: PayloadFormat = "json",
        *,
        state_file: Path | None = None,
        post: Post = post_json,
        now: Callable[[], float] = time.time,
        max_backoff_s: float = 30.0,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.url = url
        self.payload = payload
        self.max_backoff_s = max_backoff_s
        self._health = ReceiverHealth("webhook", shown(url), max_backoff_s, jitter)
        self._saved = SavedOutbox("webhook", state_file)
        self._post = post
        self._now = now
        self._lock = threading.Lock()
        self._outbox: list[dict[str, Any]] = []  # {alert_id, status, text, queued}
        self._sent: list[dict[str, Any]] = []  # {alert_id, status, at}: kept SENT_KEPT_S
        self._due = 0.0
        self.dropped = 0
        self._load()

    def update(self, alerts: list[AlertText]) -> None:
        """Queues the alerts (event-time order) durably; the thread sends them."""
        with self._lock:
            held = self._held_keys()
            now = self._now()
            for alert in alerts:
                if (alert.alert_id, alert.status) in held:
                    continue
                self._outbox.append(
                    {"alert_id": alert.alert_id, "status": alert.status, "text": alert.text,
                     "queued": now}
                )  # fmt: skip
            self._due = 0.0
            self._save()

    def held(self, since_s: float) -> set[AlertKey]:
        """Queued ones, and those sent since `since_s` (wall time)."""
        with self._lock:
            sent = {(s["alert_id"], s["status"]) for s in self._sent if s["at"] >= since_s}
            return sent | {(o["alert_id"], o["status"]) for o in self._outbox}

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._outbox)

    def send_due(self) -> float:
        """Sends the outbox in order until it is empty or the receiver fails; the seconds to
        wait before the next call."""
        while True:
            now = self._now()
            with self._lock:
                if now < self._due:
                    return self._due - now
                if not self._outbox:
                    return 1.0
                first = self._outbox[0]
            try:
                status = self._post(self.url, body_of(first["text"], self.payload))
                problem = None if 200 <= status < 300 else f"HTTP {status}"
            except (OSError, ValueError, http.client.HTTPException) as exc:
                # HTTPException: something not HTTP answered (a port reused by another
                # server): unreachable, retried, never the end of the sender's thread.
                status, problem = 0, f"{type(exc).__name__}: {exc}"[:300]
            if problem is not None and (status == 0 or status >= 500 or status in _RETRIED):
                return self._failed(problem)
            if problem is not None:
                log.error("webhook refused an alert for good: dropped", url=shown(self.url),
                          alert_id=first["alert_id"], reason=problem)  # fmt: skip
                self.dropped += 1
            self._taken(first)

    def _failed(self, problem: str) -> float:
        with self._lock:
            wait = self._health.failed(problem)
            self._due = self._now() + wait
        return wait

    def _taken(self, first: dict[str, Any]) -> None:
        with self._lock:
            if self._outbox and self._outbox[0] is first:
                self._outbox.pop(0)
            now = self._now()
            self._sent = [s for s in self._sent if s["at"] > now - SENT_KEPT_S]
            self._sent.append({"alert_id": first["alert_id"], "status": first["status"], "at": now})
            self._health.succeeded()
            self._save()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            wait = self.send_due()
            stop.wait(min(wait, 0.2))

    def _held_keys(self) -> set[AlertKey]:
        return {(o["alert_id"], o["status"]) for o in self._outbox}

    def _save(self) -> None:
        self._saved.save({"outbox": self._outbox, "sent": self._sent})

    def _load(self) -> None:
        saved = self._saved.load()
        if saved is not None:
            self._outbox = [dict(o) for o in saved.get("outbox", [])]
            self._sent = [dict(s) for s in saved.get("sent", [])]


class WebhookSink:
    name = "webhook"
    guarantee = (
        "each alert at least once, in order: kept in the checkpoint's outbox until the "
        "receiver answered 2xx, retried while it is down; a re-run batch skips what was sent"
    )

    def __init__(
        self,
        url: str,
        payload: PayloadFormat,
        checkpoint: Path | None,
        max_backoff_s: float = 30.0,
    ) -> None:
        state = None if checkpoint is None else state_file_for(checkpoint, url)
        self.notifier = WebhookNotifier(url, payload, state_file=state, max_backoff_s=max_backoff_s)
        self._thread = SenderThread(self.notifier, "webhook")

    def deliver(self, alerts: list[AlertText]) -> None:
        if alerts:
            self.notifier.update(alerts)

    def delivered(self, since_ms: int) -> set[AlertKey] | None:
        return self.notifier.held(since_ms / 1000)

    def close(self) -> None:
        self._thread.close()
