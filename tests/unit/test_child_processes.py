"""A forked helper ends with its parent: nothing is left working for a process that is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil

from zkcdc.ground.waiting import wait_until

# A parent that forks a helper which asks to end with it, reports the helper's pid, then waits.
PARENT = textwrap.dedent("""
    import os, sys, threading
    from zkcdc.ground.child_processes import ends_with_parent
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        ends_with_parent(parent)
        threading.Event().wait()  # works on, as long as anything lets it
    print(pid, flush=True)
    threading.Event().wait()
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_forked_helper_is_killed_when_its_parent_is() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    helper = None
    try:
        assert parent.stdout is not None
        helper = int(parent.stdout.readline())
        assert not _gone(helper)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        wait_until(lambda: _gone(helper), 10, what="the helper's end with its parent")
    finally:
        parent.kill()
        parent.wait()
        if helper is not None and not _gone(helper):  # the test failed: nothing left behind
            os.kill(helper, signal.SIGKILL)


def test_a_helper_whose_parent_died_before_it_asked_ends_at_once() -> None:
    # Its parent is already not the one it names (the race the check after prctl closes).
    pid = os.fork()
    if pid == 0:
        try:
            from zkcdc.ground.child_processes import ends_with_parent

            ends_with_parent(os.getppid() + 1_000_000)
        finally:
            os._exit(0)  # reached only if it did not end
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
