"""The machine's memory in use (MemTotal - MemAvailable), sampled each second while the suite
runs: its peak is printed at the end (TESTING.md says what the suite peaks at)."""

from __future__ import annotations

import threading
from pathlib import Path


def in_use_mib(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    fields: dict[str, int] = {}
    try:
        for line in meminfo.read_text().splitlines():
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if "MemTotal" not in fields or "MemAvailable" not in fields:
        return None
    return (fields["MemTotal"] - fields["MemAvailable"]) // 1024


class MemoryPeak:
    def __init__(self, interval_s: float = 1.0) -> None:
        self.peak_mib = 0
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-peak", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            now = in_use_mib()
            if now is not None:
                self.peak_mib = max(self.peak_mib, now)
            if self._stop.wait(self._interval_s):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
