"""What the tests that kill a job's Spark driver share: the job's processes, listed once while it
runs, and the one line the job must end with."""

from __future__ import annotations

import psutil


class JobProcesses:
    """A job's child processes as they are now: its Spark driver JVM, the driver's Python
    workers."""

    def __init__(self, pid: int) -> None:
        self.members = psutil.Process(pid).children(recursive=True)

    def driver(self) -> psutil.Process:
        return next(p for p in self.members if p.name() == "java")

    def left_running(self) -> list[list[str]]:
        """The command lines of those still running (a zombie has ended)."""
        return [p.cmdline() for p in self.members
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]  # fmt: skip


def the_one_error_line(log: str) -> str:
    """The job's `zkcdc: error:` line, asserted to be its only one, with no traceback."""
    assert "Traceback" not in log, log[-3000:]
    said = [line for line in log.splitlines() if "zkcdc: error:" in line]
    assert len(said) == 1, log[-3000:]
    return said[0]
