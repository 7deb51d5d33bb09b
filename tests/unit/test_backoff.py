"""Trying again with backoff (kazoo's KazooRetry): the last failure as it was once tries run
out or a stop interrupts, and the result once an attempt succeeds."""

from __future__ import annotations

import pytest

from zkcdc.ground.backoff import retried


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
