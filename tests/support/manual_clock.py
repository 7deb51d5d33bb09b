"""Time a test moves by hand, for code that takes its clock (`now=`) and its wait (`sleep=`)
as arguments: the code under test never waits on the machine's clock."""

from __future__ import annotations


class ManualClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: list[float] = []  # each wait asked for, in order

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
