"""Python's cycle collector kept out of the capture loop's way.

A capture's records hold no reference cycles: reference counting frees them. CPython's
collector still walks every live object now and then (a full collection: the known tree, every
module loaded), and under a write storm that was a pause of the capture loop every couple
of seconds, finding nothing, that held up records on its own (BENCHMARKS.md, "Figures behind
the code").

While a `CollectorPacing` is active the young generations are collected as usual (cheap: they
hold what the last few thousand allocations left), full collections never start on their own,
and every `full_every_s` one is run on purpose, after which the survivors are frozen
(`gc.freeze`: never walked again). So each of these walks only what that interval left, not
the whole tree. The price: a cycle formed among frozen objects is never reclaimed; none of
the capture's long-lived objects (znodes, images, settings) form one."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from types import TracebackType

_NEVER = 2**31 - 1  # gen1 collections before a full one: never, in practice
_lock = threading.Lock()
_active = 0
_saved: tuple[int, int, int] | None = None


class CollectorPacing:
    def __init__(
        self, full_every_s: float = 300.0, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.full_every_s = full_every_s
        self._now = now
        self._next = now() + full_every_s
        self.full_collections = 0

    def __enter__(self) -> CollectorPacing:
        self.open()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        """Pacing on (process-wide: with several open, until the last is closed)."""
        global _active, _saved
        with _lock:
            if _active == 0:
                _saved = gc.get_threshold()
                young, middle, _ = _saved
                gc.set_threshold(young, middle, _NEVER)
            _active += 1

    def close(self) -> None:
        global _active, _saved
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                gc.unfreeze()  # back to the oldest generation: collected as before
                _saved = None

    def settle(self) -> None:
        """A full collection of what is not frozen yet, then freezes the survivors. Call it
        after building something large and long-lived (a snapshot)."""
        gc.collect()
        gc.freeze()
        self.full_collections += 1
        self._next = self._now() + self.full_every_s

    def tick(self) -> None:
        """Each turn of the loop: the paced full collection when it is due."""
        if self._now() >= self._next:
            self.settle()
