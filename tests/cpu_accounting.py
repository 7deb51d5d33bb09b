"""The CPU seconds each test costs (`ZKCDC_TEST_CPU=0` turns it off): on two cores the suite is bound by
CPU, not by waiting, so its wall time says little about which test to make cheaper.

A test's CPU is its worker's own, plus every process under the worker while the test ran:
the ones the worker reaps (its commands, with what they reaped) through `RUSAGE_CHILDREN`, and
the deeper ones (a Spark driver a command leaves to exit on its own, a stack's JVMs) sampled
from /proc each second, so a process that is never reaped in the worker's line still counts
(up to its last second). Written as the `cpu_s` property of each test in the JUnit XML, which
`make test-times` sums per file.

Two known blurs: a process the worker reaps counts in full in the test it is reaped in (maybe a
later one than started it); one below a command that the command reaps counts twice."""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Iterator

Key = tuple[int, int]  # pid, start time: a reused pid is another process


def _own_and_reaped() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


_TICK = os.sysconf("SC_CLK_TCK")


def _processes() -> Iterator[tuple[int, int, float, int]]:
    """(pid, parent, own CPU seconds, start tick) of every process, from /proc/PID/stat."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rindex(b")") + 2 :].split()  # after the command's name
        utime, stime = int(fields[11]), int(fields[12])
        yield int(entry.name), int(fields[1]), (utime + stime) / _TICK, int(fields[19])


def _deeper(me: int) -> Iterator[tuple[Key, float]]:
    """Every process below the worker's direct children, with its own CPU so far (not its
    reaped children's: those are sampled themselves). One pass over /proc."""
    below: dict[int, list[tuple[int, float, int]]] = {}
    for pid, parent, cpu, started in _processes():
        below.setdefault(parent, []).append((pid, cpu, started))
    todo = [grandchild for child in below.get(me, []) for grandchild in below.get(child[0], [])]
    while todo:
        pid, cpu, started = todo.pop()
        todo.extend(below.get(pid, []))
        yield (pid, started), cpu


class CpuPerTest:
    ENV = "ZKCDC_TEST_CPU"

    def __init__(self, interval_s: float = 1.0) -> None:
        self._me = os.getpid()
        self._lock = threading.Lock()
        self._last: dict[Key, float] = {}  # the newest sample of each deeper process
        self._stop = threading.Event()
        self._interval_s = interval_s
        self._thread = threading.Thread(target=self._run, name="test-cpu", daemon=True)
        self._thread.start()

    def _sample(self) -> dict[Key, float]:
        seen = dict(_deeper(self._me))
        with self._lock:
            self._last.update(seen)
            return dict(self._last)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def mark(self) -> tuple[float, dict[Key, float]]:
        return _own_and_reaped(), self._sample()

    def since(self, start: tuple[float, dict[Key, float]]) -> float:
        own, deeper = self.mark()
        before = start[1]
        return own - start[0] + sum(cpu - before.get(key, 0.0) for key, cpu in deeper.items())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
