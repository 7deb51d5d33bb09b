"""Trying again with exponential backoff and jitter: kazoo's KazooRetry for an attempt made
in a loop of its own (`retried`), and `Backoff` for a sender that keeps its own schedule."""

from __future__ import annotations

import random
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


class Backoff:
    """How long a sender waits after each failure in a row: a random time up to a cap that
    doubles from `first_s` to `most_s` ("full jitter", as confluent-kafka-python's and AWS's
    clients retry), so the senders a receiver's outage held back do not all come back at
    once; a success starts it again. `jitter` draws from [0, 1): injected where a test
    counts the waits."""

    def __init__(
        self,
        first_s: float = 1.0,
        most_s: float = 30.0,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.first_s, self.most_s = first_s, most_s
        self._jitter = jitter
        self._cap = first_s

    def failed(self) -> float:
        """The wait after one more failure."""
        cap, self._cap = self._cap, min(self._cap * 2, self.most_s)
        return cap * self._jitter()

    def succeeded(self) -> None:
        self._cap = self.first_s
