"""The one way zkcdc waits for something: poll a predicate until it holds, the time is up, or
waiting has lost its point (the process that was to do it has exited). Products, tests and
benchmarks use it alike; a retry of a failed call is `Backoff`'s (ground/backoff.py).

Time and sleep are injected, so the rules here are tested without waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from zkcdc.ground.errors import ZkcdcError

T = TypeVar("T")


class WaitFailed(ZkcdcError):
    """What was waited for did not come: the time was up, or waiting lost its point."""


def wait_until(
    predicate: Callable[[], T | None],
    timeout_s: float,
    *,
    what: str,
    interval_s: float = 0.1,
    abandon: Callable[[], str | None] | None = None,
    detail: Callable[[], str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """The first truthy value of `predicate()`, asked every `interval_s`. WaitFailed when
    `timeout_s` has passed, or at once when `abandon()` gives a reason (a process exited);
    its message names `what` and ends with `detail()` (a log's tail) where given."""
    deadline = clock() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        reason = abandon() if abandon is not None else None
        now = clock()
        if reason is None and now >= deadline:
            reason = f"not within {timeout_s:g} s"
        if reason is not None:
            extra = f"\n{detail()}" if detail is not None else ""
            raise WaitFailed(f"waited for {what}: {reason}{extra}")
        sleep(max(0.0, min(interval_s, deadline - now)))
