"""The JIT compilers niced: which threads are theirs, and a real renice of threads of this
process named as HotSpot names its compilers, those there at the start and one started
later, with every other thread left as it was."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from zkcdc.ground.waiting import wait_until
from zkcdc.streaming.job.compiler_priority import (
    compiler_threads,
    compilers_niced,
    thread_names,
)


def test_the_compiler_threads_are_c1s_and_c2s() -> None:
    names = {
        7: "C2 CompilerThre", 3: "C1 CompilerThre", 9: "C2 CompilerThre", 1: "java",
        4: "VM Thread", 5: "G1 Conc#0", 6: "Compiler", 8: "XC2 CompilerThre",
    }  # fmt: skip
    assert compiler_threads(names) == [3, 7, 9]
    assert compiler_threads({}) == []


def test_thread_names_of_a_process_that_is_gone_are_none(tmp_path: Path) -> None:
    assert thread_names(2**22 + 1) == {}
    task = tmp_path / "42" / "task"
    (task / "43").mkdir(parents=True)
    (task / "43" / "comm").write_text("C2 CompilerThre\n")
    (task / "44").mkdir()  # ended between the listing and the read: left out
    (task / "not-a-thread").mkdir()
    assert thread_names(42, proc=tmp_path) == {43: "C2 CompilerThre"}


@contextmanager
def named_thread(name: str) -> Iterator[int]:
    """A thread of this process with Linux name `name` while in the block: its id."""
    started, done = threading.Event(), threading.Event()
    ids: list[int] = []

    def run() -> None:
        ids.append(threading.get_native_id())
        Path(f"/proc/self/task/{ids[0]}/comm").write_text(name)
        started.set()
        done.wait()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait()
    try:
        yield ids[0]
    finally:
        done.set()
        thread.join()


def niceness(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def test_the_compilers_are_niced_those_started_later_too_and_no_other_thread() -> None:
    own = niceness(threading.get_native_id())
    with (
        named_thread("C2 CompilerThread0") as c2, named_thread("VM Thread") as other,
        named_thread("C2 CompilerThread1") as nicer,
    ):  # fmt: skip
        before = niceness(c2)
        os.setpriority(os.PRIO_PROCESS, nicer, before + 7)  # already nicer: left as it is
        with compilers_niced(os.getpid(), niceness=before + 5, check_s=0.02):
            wait_until(lambda: niceness(c2) == before + 5, 10, what="C2 niced", interval_s=0.05)
            with named_thread("C1 CompilerThread3") as later:
                wait_until(
                    lambda: niceness(later) == before + 5, 10,
                    what="a compiler started later niced", interval_s=0.05,
                )  # fmt: skip
            assert niceness(other) == before
            assert niceness(nicer) == before + 7
        assert niceness(threading.get_native_id()) == own


def test_nothing_is_watched_at_niceness_zero_or_without_a_pid() -> None:
    for pid, value in ((os.getpid(), 0), (None, 10), (0, 10)):
        with compilers_niced(pid, niceness=value):
            assert "compiler-priority" not in {t.name for t in threading.enumerate()}
    with compilers_niced(os.getpid(), niceness=1):
        assert "compiler-priority" in {t.name for t in threading.enumerate()}
    assert "compiler-priority" not in {t.name for t in threading.enumerate()}
