"""systemd's readiness and watchdog protocol (sd_notify), without libsystemd: a datagram to
$NOTIFY_SOCKET. Outside systemd (no such variable) every call is a no-op."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Mapping


def notify(state: str, environ: Mapping[str, str] | None = None) -> bool:
    """Sends `state` ("READY=1", "WATCHDOG=1", "STATUS=...", "STOPPING=1"); True if sent."""
    address = (os.environ if environ is None else environ).get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # an abstract socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError:
        return False  # systemd gone or misconfigured: never a reason to stop capturing
    return True


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """Half of $WATCHDOG_USEC (systemd's advice), when this process is the one watched."""
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC")
    pid = env.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2e6
    except ValueError:
        return None


def keep_alive(healthy: Callable[[], bool], stop: threading.Event) -> threading.Thread | None:
    """Pets systemd's watchdog while `healthy()` holds: a wedged daemon is restarted by systemd
    rather than left hanging. None when no watchdog is set."""
    interval = watchdog_interval_s()
    if interval is None:
        return None

    def run() -> None:
        while not stop.wait(interval):
            if healthy():
                notify("WATCHDOG=1")

    thread = threading.Thread(target=run, name="systemd-watchdog", daemon=True)
    thread.start()
    return thread
