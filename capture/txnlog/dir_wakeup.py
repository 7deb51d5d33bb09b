"""Waiting for ZooKeeper to write: wake when a file in its log folder changes (Linux inotify),
instead of polling the folder every few milliseconds.

Polling the folder costs CPU on a quiet ensemble and up to a poll interval of lag a
transaction (BENCHMARKS.md, "Figures behind the code"); inotify wakes the capture on the write
itself and lets it sleep otherwise. Events queue in the kernel from the moment the watch is added, so a write between
reading the log and waiting is never missed (the wait just returns at once). Where inotify is
not available (another OS, a network file system, the watch limit reached) the wait falls back
to the poll interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as inotify

from zkcdc.ground import logs

log = logs.get("zkcdc.capture")

_MASK = inotify.MODIFY | inotify.MOVED_TO | inotify.CREATE | inotify.DELETE


class DirectoryWakeup:
    """`wait(timeout)` returns as soon as a file in `directory` is written, created or
    removed, or after `timeout` seconds; True when something changed (or may have)."""

    def __init__(
        self,
        directory: Path,
        poll_interval_s: float,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.directory = directory
        self._poll_interval_s = poll_interval_s
        self._sleep = sleep
        self._inotify = _watching(directory)
        if self._inotify is None:
            log.info("no inotify on the log folder: polling it", every_s=poll_interval_s)

    @property
    def notified(self) -> bool:
        """Whether changes are announced by the kernel (False: polled)."""
        return self._inotify is not None

    def wait(self, timeout: float) -> bool:
        if self._inotify is None:
            self._sleep(min(timeout, self._poll_interval_s))
            return True
        # Every event queued is read at once: one wake-up for however many writes came.
        return bool(self._inotify.read(timeout=max(0, round(timeout * 1000))))

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None


def _watching(directory: Path) -> INotify | None:
    try:
        watcher = INotify(nonblocking=True)
    except OSError:
        return None  # not Linux, or no inotify instances left
    try:
        watcher.add_watch(directory, _MASK)
    except OSError:  # a network file system, the watch limit reached
        watcher.close()
        return None
    return watcher
