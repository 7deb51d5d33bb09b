"""Stopping a child process so that nothing is left running."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from typing import Any

PR_SET_PDEATHSIG = 1  # prctl's option number, from linux/prctl.h


def stop(process: subprocess.Popen[Any], timeout_s: float, sig: int = signal.SIGTERM) -> int:
    """`sig`, up to `timeout_s` for it to end, then SIGKILL; its exit code (-9 if killed)."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def ends_with_parent(parent: int) -> None:
    """In a process just forked from `parent`: the kernel SIGKILLs it when its parent dies
    (Linux's parent-death signal), and it ends at once if the parent died before it asked.
    A forked helper whose parent is killed mid-work (a cancelled Spark task's Python worker)
    must not go on working for no one. Elsewhere (no prctl) the helper ends when it next
    writes to its gone parent. The signal follows the thread that forked, so fork from one
    that lives as long as the helper's work (a Python worker's main thread does)."""
    try:  # the running program's own C library: no lookup (a subprocess) in a fresh fork
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        prctl = None
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)
