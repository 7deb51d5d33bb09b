"""Python's cycle collector paused for a piece of work that makes many objects at once and
holds no cycles, in a process that keeps millions of objects: each full collection walks them
all (BENCHMARKS.md: in B4 ~40 % of a replay's time; B8: a snapshot of 200,000 partitions took 1-2 s, most of
it collections, against 0.2-0.6 s without)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
