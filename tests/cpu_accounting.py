"""The CPU seconds each test costs (`ZKCDC_TEST_CPU=0` turns it off): on two cores the suite is bound by
CPU, not by waiting, so its wall time says little about which test to make cheaper.

A test's CPU is its worker's own, plus every process under the worker while the test ran:
the ones the worker reaps (its commands, with what they reaped) through `RUSAGE_CHILDREN`, and
the deeper ones (a stack's JVMs a command leaves running, a Spark driver under a command that
is still running) sampled from /proc each second, so a process that is never reaped in the
worker's line still counts (up to its last second). A deeper process that is gone, with every
process above it up to the worker's child gone too, was reaped down that line (a `zkcdc`
command waits for its Spark driver, the driver for its Python workers): it is in
`RUSAGE_CHILDREN` already and is not added again. Written as the `cpu_s` property of each test
in the JUnit XML, which `make test-times` sums per file.

Two known blurs: a process the worker reaps counts in full in the test it is reaped in (maybe a
later one than started it); one whose parent ended without waiting for it (init reaps it) is
not counted once it is gone."""

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


def _deeper(me: int) -> tuple[dict[Key, float], dict[Key, Key | None], set[Key]]:
    """Every process below the worker's direct children with its own CPU so far (not its
    reaped children's: those are sampled themselves); each one's parent (None: a direct child
    of the worker); and every process alive now. One pass over /proc."""
    below: dict[int, list[tuple[int, float, int]]] = {}
    alive: set[Key] = set()
    for pid, parent, cpu, started in _processes():
        below.setdefault(parent, []).append((pid, cpu, started))
        alive.add((pid, started))
    cpus: dict[Key, float] = {}
    parents: dict[Key, Key | None] = {}
    todo = [
        (grandchild, (child[0], child[2]))
        for child in below.get(me, [])
        for grandchild in below.get(child[0], [])
    ]
    for child in below.get(me, []):
        parents[(child[0], child[2])] = None
    while todo:
        (pid, cpu, started), parent = todo.pop()
        key = (pid, started)
        todo.extend((grandchild, key) for grandchild in below.get(pid, []))
        cpus[key], parents[key] = cpu, parent
    return cpus, parents, alive


class CpuPerTest:
    ENV = "ZKCDC_TEST_CPU"

    def __init__(self, interval_s: float = 1.0) -> None:
        self._me = os.getpid()
        self._lock = threading.Lock()
        self._last: dict[Key, float] = {}  # the newest sample of each deeper process
        self._parents: dict[Key, Key | None] = {}  # None: a direct child of the worker
        self._stop = threading.Event()
        self._interval_s = interval_s
        self._thread = threading.Thread(target=self._run, name="test-cpu", daemon=True)
        self._thread.start()

    def _sample(self) -> tuple[dict[Key, float], set[Key]]:
        seen, parents, alive = _deeper(self._me)
        with self._lock:
            self._last.update(seen)
            self._parents.update(parents)
            return dict(self._last), alive

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def _reaped_in_line(self, key: Key, alive: set[Key]) -> bool:
        """Whether `key` and every process above it up to the worker's child are gone: each was
        then waited for by its parent, and its CPU is in the worker's RUSAGE_CHILDREN."""
        with self._lock:
            at: Key | None = key
            while at is not None:
                if at in alive or at not in self._parents:
                    return False
                at = self._parents[at]
            return True

    def mark(self) -> tuple[float, dict[Key, float]]:
        return _own_and_reaped(), self._sample()[0]

    def since(self, start: tuple[float, dict[Key, float]]) -> float:
        own = _own_and_reaped()
        deeper, alive = self._sample()
        before = start[1]
        sampled = sum(
            cpu - before.get(key, 0.0)
            for key, cpu in deeper.items()
            if not self._reaped_in_line(key, alive)
        )
        return own - start[0] + sampled

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
