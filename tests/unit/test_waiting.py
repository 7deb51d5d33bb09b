"""The one wait (zkcdc/ground/waiting.py), on an injected clock: it returns the predicate's
first truthy value, gives up at the deadline or at once when waiting lost its point, and never
sleeps past the deadline."""

from __future__ import annotations

import pytest
from manual_clock import ManualClock

from zkcdc.ground.waiting import WaitFailed, wait_until


def test_the_first_truthy_value_is_returned_after_as_many_looks_as_it_took() -> None:
    clock, answers = ManualClock(), iter([None, 0, "", "found"])
    value = wait_until(lambda: next(answers), 10, what="x", interval_s=0.5,
                       clock=clock, sleep=clock.sleep)  # fmt: skip
    assert value == "found" and clock.slept == [0.5, 0.5, 0.5]


def test_at_the_deadline_it_fails_naming_what_and_the_detail_never_sleeping_past_it() -> None:
    clock = ManualClock()
    with pytest.raises(WaitFailed) as failed:
        wait_until(lambda: None, 1.0, what="the snapshot", interval_s=0.4,
                   detail=lambda: "log tail", clock=clock, sleep=clock.sleep)  # fmt: skip
    assert str(failed.value) == "waited for the snapshot: not within 1 s\nlog tail"
    assert clock.slept == pytest.approx([0.4, 0.4, 0.2]) and clock.now == pytest.approx(1.0)


def test_a_reason_to_abandon_ends_the_wait_at_once() -> None:
    clock = ManualClock()
    with pytest.raises(WaitFailed, match="waited for in sync: capture exited 3"):
        wait_until(lambda: False, 60, what="in sync", abandon=lambda: "capture exited 3",
                   clock=clock, sleep=clock.sleep)  # fmt: skip
    assert clock.slept == []
