"""Stopping a child process so that nothing is left running."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any], timeout_s: float, sig: int = signal.SIGTERM) -> int:
    """`sig`, up to `timeout_s` for it to end, then SIGKILL; its exit code (-9 if killed)."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()
