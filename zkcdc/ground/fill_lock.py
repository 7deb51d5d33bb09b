"""One process at a time fills a cache: two zkcdc processes (or two test workers) starting on a
machine with an empty cache would otherwise run mvn or apt-get into the same folder at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def filling(folder: Path, name: str, wait: bool = True) -> Iterator[bool]:
    """Holds `<folder>/.<name>.lock` exclusively while the body fills the cache, and yields True.
    The caller checks the cache again inside: another process may have filled it meanwhile.
    The kernel drops the lock when its holder dies, so a killed fill never blocks the next.
    `wait=False`: yields False at once when another process holds it (the caller goes on
    without what is being filled)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f".{name}.lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
