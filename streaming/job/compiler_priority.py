"""The driver JVM's JIT compilers at a lower CPU priority while the job serves alerts.

After a start, HotSpot's compilers work for minutes on the code the job's catch-up made hot:
at 100,000 partitions on two cores, C2 took ~0.7 of a core through the job's first minute,
and every micro-batch waited for a core meanwhile (BENCHMARKS.md, B9). Niced, the compilers
take the CPU the job leaves idle: the micro-batches run on time, and the compiled code still
comes, later. The warm-up runs before this, at full priority: the compilers' work is its
purpose.

Linux only (a thread's priority set by its id, the threads' names in /proc); elsewhere, or
where the JVM's threads cannot be read, nothing is done. Raising a thread's niceness needs no
privilege; nothing here lowers it."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from zkcdc.ground import logs

log = logs.get("zkcdc.stream")

# The niceness given to the compiler threads (0: left as they are): the lowest, so that a
# thread of the job that is ready to run always goes first. The compilers still have the cores
# whenever the job waits (for Kafka, for its Python workers); at 100,000 partitions the catch-up
# was no slower for it. In profile runs shaped as B9's, first-minute p99 there was 953 ms at 10
# and 852 ms at 19 (one run each; 1,502 ms at 0).
COMPILER_NICENESS = 19

# HotSpot names them "C1 CompilerThread0", "C2 CompilerThread1", ...; Linux keeps a thread's
# name to 15 characters. It starts and ends them as its queue grows and shrinks, so they are
# looked for again every CHECK_S.
_COMPILER_THREAD = re.compile(r"^C[12] CompilerThre")
CHECK_S = 1.0


def compiler_threads(names: Mapping[int, str]) -> list[int]:
    """The ids of the JIT compiler threads among a process's threads (id -> name), in order."""
    return sorted(t for t, name in names.items() if _COMPILER_THREAD.match(name))


def thread_names(pid: int, proc: Path = Path("/proc")) -> dict[int, str]:
    """A process's threads, id -> name; empty where they cannot be read (gone, not Linux)."""
    names: dict[int, str] = {}
    with contextlib.suppress(OSError):
        for task in (proc / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                names[int(task.name)] = (task / "comm").read_text().rstrip("\n")
    return names


@contextlib.contextmanager
def compilers_niced(
    pid: int | None, niceness: int = COMPILER_NICENESS, check_s: float = CHECK_S
) -> Iterator[None]:
    """Within the block, process `pid`'s JIT compiler threads, those there and those it starts
    (looked for every `check_s`), run at `niceness` (None or 0: nothing done)."""
    if not pid or niceness <= 0 or not hasattr(os, "setpriority"):
        yield
        return
    stop = threading.Event()

    def run() -> None:
        while True:
            for tid in compiler_threads(thread_names(pid)):
                # Asked each time rather than remembered: a thread id may be reused, and a
                # thread already as nice or nicer is left as it is.
                with contextlib.suppress(OSError):  # gone since it was listed
                    if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                        os.setpriority(os.PRIO_PROCESS, tid, niceness)
            if stop.wait(check_s):
                return

    thread = threading.Thread(target=run, name="compiler-priority", daemon=True)
    thread.start()
    log.info("the JIT compilers run niced while the job serves", niceness=niceness)
    try:
        yield
    finally:
        stop.set()
        # Until it has ended, however long its pass over /proc takes on a busy machine: a
        # bounded join left it running past the block (seen under the test suite's load).
        thread.join()


def jvm_pid(spark: object) -> int | None:
    """The pid of the session's driver JVM, or None where it is not on this machine's /proc."""
    try:
        pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
    except Exception:  # a remote or stopped gateway: nothing to nice
        return None
    return pid if Path(f"/proc/{pid}/task").is_dir() else None
