"""Waiting for ZooKeeper to write: wake when a file in its log folder changes (Linux inotify),
instead of polling the folder every few milliseconds.

Polling every 2 ms cost the txnlog capture about a tenth of a core on a quiet ensemble and up
to 2 ms of lag per transaction; inotify wakes it on the write itself and lets it sleep
otherwise. Events queue in the kernel from the moment the watch is added, so a write between
reading the log and waiting is never missed (the wait just returns at once). Where inotify is
not available (another OS, a network file system, the watch limit reached) the wait falls back
to the poll interval."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import time
from collections.abc import Callable
from pathlib import Path

from zkcdc.ground import logs

log = logs.get("zkcdc.capture")

# <sys/inotify.h>
_IN_MODIFY = 0x002
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = _IN_MODIFY | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE


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
        self._fd = _inotify_fd(directory)
        if self._fd is None:
            log.info("no inotify on the log folder: polling it", every_s=poll_interval_s)

    @property
    def notified(self) -> bool:
        """Whether changes are announced by the kernel (False: polled)."""
        return self._fd is not None

    def wait(self, timeout: float) -> bool:
        if self._fd is None:
            self._sleep(min(timeout, self._poll_interval_s))
            return True
        ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        while True:  # drain: one wake-up for however many writes came meanwhile
            try:
                if not os.read(self._fd, 65536):
                    break
            except BlockingIOError:
                break
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _inotify_fd(directory: Path) -> int | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    except (OSError, AttributeError):
        return None  # not Linux
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(directory), _MASK) < 0:
        os.close(fd)
        return None
    return fd
