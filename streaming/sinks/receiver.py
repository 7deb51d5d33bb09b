"""What the sinks that post to a receiver over the network (Alertmanager, webhooks) share:
the receiver's health (a backoff with full jitter while it is down, one log line when it goes
away and one when it is back), the file in the checkpoint that keeps what is still to send
across restarts, and the thread that sends from the job's start to its end."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from zkcdc.ground import logs
from zkcdc.ground.backoff import Backoff
from zkcdc.ground.private_files import atomic_write


class ReceiverHealth:
    """Whether the receiver answers; how long to wait after a failure (1 s doubling up to
    `max_backoff_s`, full jitter). A receiver going away and coming back is one line each,
    not one line a retry."""

    def __init__(
        self, what: str, url: str, max_backoff_s: float, jitter: Callable[[], float]
    ) -> None:
        self.what = what  # "webhook", "alertmanager": the start of its log lines
        self.url = url  # as logs may show it
        self._backoff = Backoff(1.0, max_backoff_s, jitter)
        self._log = logs.get(f"zkcdc.{what}")
        self.failing = False

    def failed(self, reason: str) -> float:
        """The seconds to wait before the next try."""
        if not self.failing:
            self._log.warning(f"{self.what} unreachable: retrying", url=self.url, reason=reason)
            self.failing = True
        return self._backoff.failed()

    def succeeded(self, **context: Any) -> None:
        self._backoff.succeeded()
        if self.failing:
            self._log.info(f"{self.what} reachable again", url=self.url, **context)
            self.failing = False


class SavedOutbox:
    """A JSON object in the checkpoint holding what a sender has still to send; none (no
    checkpoint) keeps nothing. A file that cannot be written or read is a warning, never the
    job's end: the alerts are still sent while the job runs."""

    def __init__(self, what: str, file: Path | None) -> None:
        self.what = what
        self.file = file
        self._log = logs.get(f"zkcdc.{what}")

    def save(self, state: dict[str, Any]) -> None:
        if self.file is None:
            return
        try:
            atomic_write(self.file, json.dumps(state))
        except OSError as exc:
            self._log.warning(f"{self.what} outbox not saved", file=str(self.file), reason=str(exc))

    def load(self) -> dict[str, Any] | None:
        if self.file is None or not self.file.exists():
            return None
        try:
            saved = json.loads(self.file.read_text())
            if not isinstance(saved, dict):
                raise TypeError(f"a {type(saved).__name__}, not an object")
            return saved
        except (OSError, ValueError, TypeError) as exc:
            self._log.warning(f"{self.what} outbox unreadable: starting empty", reason=str(exc))
            return None


class Sender(Protocol):
    def run(self, stop: threading.Event) -> None: ...

    def send_due(self) -> float: ...


class SenderThread:
    """A sender on a thread of its own, from the job's start to its end."""

    def __init__(self, sender: Sender, name: str) -> None:
        self.sender = sender
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=sender.run, args=(self._stop,), name=name, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stops the thread after one last try for what is due; the rest stays in the outbox
        for the next run."""
        self._stop.set()
        self._thread.join(15)
        self.sender.send_due()
