"""Who used the machine's cores over a stretch of a benchmark: CPU seconds per role (the ui
server, the alert job's Python and Spark JVM, capture, Kafka, ZooKeeper, chromium's renderer
and the rest of chromium), the machine's busy share, and how long the renderer's main thread
sat runnable waiting for a core (the kernel's schedstat). Tells a page's slow task apart from a
page that was not given a core."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psutil
from harness import runqueue_seconds
from suite_census import role_in

# (role, words its command line holds), the first match wins.
ROLES = [
    ("chromium renderer", ("--type=renderer",)),
    ("chromium (other)", ("chrom",)),
    ("ui server", (" ui ",)),
    ("alert job (Spark JVM)", ("SparkSubmit", "org.apache.spark")),
    ("alert job (Python)", ("stream alerts", "pyspark")),
    ("capture", (" capture ",)),
    ("simulator", (" simulate ",)),
    ("Kafka", ("kafka.Kafka",)),
    ("ZooKeeper", ("zookeeper",)),
]


def role_of(command: str) -> str:
    return role_in(ROLES, command)


def _wait_s(pid: int) -> float:
    try:
        return runqueue_seconds(pid)
    except (OSError, IndexError, ValueError):  # gone meanwhile
        return 0.0


@dataclass(frozen=True)
class Reading:
    cpu_s: dict[int, tuple[str, float]]  # pid -> (role, user + system seconds)
    renderer_wait_s: dict[int, float]  # renderer pid -> its main thread's run-queue wait
    machine: Any  # psutil.cpu_times()


def read() -> Reading:
    cpu: dict[int, tuple[str, float]] = {}
    waits: dict[int, float] = {}
    for process in psutil.process_iter(["cmdline", "cpu_times"]):
        try:
            command = " ".join(process.info["cmdline"] or ())
            times = process.info["cpu_times"]
        except psutil.Error:
            continue
        if times is None:
            continue
        role = role_of(command)
        cpu[process.pid] = (role, float(times.user + times.system))
        if role == "chromium renderer":
            waits[process.pid] = _wait_s(process.pid)
    return Reading(cpu, waits, psutil.cpu_times())


def between(before: Reading, after: Reading, seconds: float) -> dict[str, Any]:
    """CPU per role over the stretch (cores on average), the machine's busy share, and the
    renderers' main threads' waits for a core (seconds, the most of any renderer)."""
    by_role: dict[str, float] = {}
    for pid, (role, used) in after.cpu_s.items():
        earlier = before.cpu_s.get(pid, (role, 0.0))[1]
        by_role[role] = by_role.get(role, 0.0) + max(0.0, used - earlier)
    idle = (after.machine.idle + after.machine.iowait) - (
        before.machine.idle + before.machine.iowait
    )
    total = sum(after.machine) - sum(before.machine)
    waits = [w - before.renderer_wait_s.get(pid, 0.0) for pid, w in after.renderer_wait_s.items()]
    return {
        "seconds": round(seconds, 1),
        "cores_by_role": {
            role: round(used / max(seconds, 1e-9), 2)
            for role, used in sorted(by_role.items(), key=lambda kv: -kv[1])
            if used >= 0.05 * seconds / 100  # under a twentieth of a percent: left out
        },
        "machine_busy_share": round(1 - idle / total, 3) if total > 0 else None,
        "renderer_waited_for_a_core_s": round(max(waits, default=0.0), 1),
    }
