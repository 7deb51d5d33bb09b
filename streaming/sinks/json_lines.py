"""`--alerts-out`: alerts appended to a JSON-lines file, one alert a line."""

from __future__ import annotations

import json
from pathlib import Path

from zkcdc.streaming.sinks.sink import AlertKey, AlertText


def alert_key(line: str) -> AlertKey | None:
    """(alert_id, status) of a line of the file; None for one a crash cut short."""
    try:
        alert = json.loads(line)
        return alert["alert_id"], alert["status"]
    except (ValueError, KeyError, TypeError):
        return None


def start_line(path: Path) -> None:
    """A line a crash cut short stays a line of its own: what is appended starts anew."""
    if path.exists() and _ends_unfinished(path):
        with path.open("a") as out:
            out.write("\n")


def _ends_unfinished(path: Path) -> bool:
    with path.open("rb") as file:
        if file.seek(0, 2) == 0:
            return False
        file.seek(-1, 2)
        return file.read(1) != b"\n"


class JsonLinesSink:
    name = "file"
    guarantee = (
        "each alert once: a re-run batch appends only the lines the file does not hold; "
        "a line cut short by a crash stays, unparsed, on a line of its own"
    )

    def __init__(self, path: Path) -> None:
        self.path = path

    def deliver(self, alerts: list[AlertText]) -> None:
        if alerts:
            start_line(self.path)
            with self.path.open("a") as out:
                out.write("".join(a.text + "\n" for a in alerts))

    def delivered(self, since_ms: int) -> set[AlertKey] | None:
        if not self.path.exists():
            return set()
        with self.path.open() as lines:
            return {key for line in lines if (key := alert_key(line)) is not None}

    def close(self) -> None:
        pass
