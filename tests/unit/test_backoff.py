"""Trying again with backoff (kazoo's KazooRetry): the last failure as it was once tries run
out or a stop interrupts, and the result once an attempt succeeds. A sender's `Backoff`: full
jitter under a cap that doubles to its most, and starts again after a success."""

from __future__ import annotations

import pytest

from zkcdc.ground.backoff import Backoff, retried


class Unreachable(Exception):
    pass


def test_the_last_failure_is_raised_as_it_was_once_tries_run_out():
    slept: list[float] = []
    calls: list[int] = []

    def attempt() -> int:
        calls.append(1)
        raise Unreachable(f"attempt {len(calls)}")

    with pytest.raises(Unreachable, match="attempt 3"):
        retried(attempt, Unreachable, 3, slept.append)
    assert len(calls) == 3
    assert 0.6 <= slept[0] <= 1.4 and slept[1] > slept[0]  # 1 s with jitter, then longer


def test_one_try_never_sleeps_and_other_errors_are_not_retried():
    slept: list[float] = []
    with pytest.raises(Unreachable):
        retried(lambda: (_ for _ in ()).throw(Unreachable("down")), Unreachable, 1, slept.append)
    assert slept == []
    with pytest.raises(ValueError):
        retried(lambda: int("x"), Unreachable, None, slept.append)
    assert slept == []


def test_forever_goes_on_until_an_attempt_succeeds_and_a_stop_interrupts_it():
    outcomes = iter([Unreachable("a"), Unreachable("b"), 7])

    def attempt() -> int:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    assert retried(attempt, Unreachable, None, lambda s: None) == 7

    def never() -> int:
        raise Unreachable("still down")

    with pytest.raises(Unreachable, match="still down"):
        retried(never, Unreachable, None, lambda s: None, interrupt=lambda: True)


def test_a_senders_waits_are_random_shares_of_a_cap_that_doubles_to_its_most():
    """The sinks' waits were exactly 1, 2, 4 ... s: every job's sender came back to a
    receiver at the same moments after its outage."""
    import random

    draws = random.Random(7)
    backoff = Backoff(1.0, 8.0, draws.random)
    waits = [backoff.failed() for _ in range(40)]
    caps = [1.0, 2.0, 4.0] + [8.0] * 37
    assert all(0 <= w < cap for w, cap in zip(waits, caps, strict=True))
    assert len({round(w, 6) for w in waits}) == 40, "the waits are drawn, not fixed"
    assert max(waits[3:]) > 4.0, "the cap reached its most"
    backoff.succeeded()
    assert Backoff(1.0, 8.0, lambda: 1.0).failed() == 1.0
    assert backoff.failed() < 1.0, "a success starts the cap again from the first"
