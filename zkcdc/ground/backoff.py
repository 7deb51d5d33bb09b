"""Trying again with exponential backoff: kazoo's KazooRetry, for any kind of attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kazoo.retry import ForceRetryError, KazooRetry, RetryFailedError

T = TypeVar("T")


def retried(
    attempt: Callable[[], T],
    retry_on: type[Exception] | tuple[type[Exception], ...],
    tries: int | None,
    sleep: Callable[[float], None],
    interrupt: Callable[[], bool] | None = None,
) -> T:
    """`attempt()` until it returns: on `retry_on` again after 1 s, doubling (with jitter) up
    to 30 s; `tries` None is forever. Out of tries, or `interrupt()` true, the last failure
    is raised as it was."""
    failures: list[Exception] = []

    def once() -> T:
        try:
            return attempt()
        except retry_on as exc:
            failures.append(exc)
            raise ForceRetryError() from exc

    retry = KazooRetry(
        max_tries=-1 if tries is None else tries,
        delay=1.0,
        backoff=2,
        max_delay=30.0,
        sleep_func=sleep,
        interrupt=interrupt,
    )
    try:
        result: T = retry(once)
        return result
    except (RetryFailedError, InterruptedError):
        raise failures[-1] from None
