"""One process at a time fills a cache: two zkcdc processes (or two test workers) starting on a
machine with an empty cache would otherwise run mvn or apt-get into the same folder at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fill:
    """Whether this process holds the lock (true) and, if so, the lock's file descriptor: a
    child process given it (`pass_fds`) holds the lock with its parent, and on after it."""

    ours: bool
    fd: int = -1

    def __bool__(self) -> bool:
        return self.ours


@contextmanager
def filling(folder: Path, name: str, wait: bool = True) -> Iterator[Fill]:
    """Holds `<folder>/.<name>.lock` exclusively while the body fills the cache, and yields a
    true Fill. The caller checks the cache again inside: another process may have filled it
    meanwhile. The kernel drops the lock when its last holder dies, so a killed fill never
    blocks the next. `wait=False`: yields a false Fill at once when another process holds it
    (the caller goes on without what is being filled)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f".{name}.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield Fill(False)
            return
        try:
            yield Fill(True, handle.fileno())
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
