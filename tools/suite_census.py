"""Who used the machine's cores while a command ran (`make test`, a benchmark): CPU seconds by
role (Kafka brokers, ZooKeeper, Spark drivers, executors and Python workers, capture, ...),
from /proc sampled each second, against the machine's busy CPU over the same stretch.

`tests/cpu_accounting.py` says which *test* cost CPU; this says which *kind of process* did,
the shared stack's brokers and the stacks the tests start included. A process that lives less
than one interval between two samples is missed, and one that ends counts up to its last
sample: the table's total runs a little under the machine's busy CPU.

Run: `make test-census` (a `make test` under it, the table written to
test-artifacts/census.json and printed), or
`.venv/bin/python tools/suite_census.py [--out FILE] [--interval S] -- COMMAND [ARG...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
# (role, words its command line holds): the first match wins, so the narrower come first.
ROLES = (
    ("Spark executor JVM", ("CoarseGrainedExecutorBackend",)),
    ("Spark standalone master/worker", ("deploy.master.Master", "deploy.worker.Worker")),
    ("Spark driver JVM", ("SparkSubmit",)),
    ("Spark's Python workers", ("pyspark.daemon", "pyspark.worker", "pyspark.sql.streaming")),
    ("spark-submit's launcher", ("bin/spark-submit", "bin/spark-class", "launcher.Main")),
    ("Kafka broker or KRaft controller", ("kafka.Kafka ",)),
    ("ZooKeeper", ("QuorumPeerMain", "ZooKeeperServerMain")),
    ("Kafka's tools", ("org.apache.kafka.tools", "kafka.admin.", "kafka.tools.")),
    ("schema registry", ("apicurio",)),
    ("chromium", ("chrom",)),
    ("other JVMs", ("java ", "/java ")),
    ("zkcdc stream (driver's Python)", (" stream ", "zkcdc_job.py")),
    ("zkcdc capture", (" capture ",)),
    ("zkcdc simulate", (" simulate ",)),
    ("zkcdc replay", (" replay ",)),
    ("zkcdc ui", (" ui ",)),
    ("zkcdc, other commands", ("-m zkcdc", "/zkcdc ")),
    ("pytest and its workers", ("pytest", "exec(eval(sys.stdin.readline()))")),
    (
        "the venv (pip, uv)",
        ("bin/pip ", "pip-runner", "pip/_vendor", "bin/uv ", "pip_compileall.py"),
    ),
    ("lint (mypy, ruff)", ("bin/mypy", "bin/ruff")),
)


def role_in(roles: Sequence[tuple[str, tuple[str, ...]]], command: str) -> str:
    """The first of `roles` whose words `command` holds (bench/cpu_census.py's roles too)."""
    padded = f" {command} "
    for role, words in roles:
        if any(word in padded for word in words):
            return role
    return "other"


def role_of(command: str) -> str:
    return role_in(ROLES, command)


@dataclass
class Seen:
    command: str
    cpu_at_start: float  # what it had used when first seen, if it ran before the census
    cpu_s: float
    name: str = ""  # the kernel's name for it, which an exec changes (spark-submit's script)
    first_s: float = 0.0  # seconds into the census it was first and last seen
    last_s: float = 0.0

    @property
    def used_s(self) -> float:
        """CPU seconds used while the census looked."""
        return self.cpu_s - self.cpu_at_start


def machine_busy_s() -> float:
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICKS  # all but idle and iowait


def sample(seen: dict[tuple[int, str], Seen], first: bool, at_s: float = 0.0) -> None:
    """One look at every process: its CPU so far, keyed by pid and start time (pids recur)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                text = stat.read()
            comm, rest = text[text.index("(") + 1 :].rsplit(")", 1)
            fields = rest.split()
            cpu = (int(fields[11]) + int(fields[12])) / TICKS
            key = (int(name), fields[19])
            known = seen.get(key)
            if known is not None and known.name == comm:
                known.cpu_s, known.last_s = cpu, at_s
                continue
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if known is not None:  # it exec'd another program: all of its CPU is that one's
            known.command, known.name, known.cpu_s = command[:2000] or known.command, comm, cpu
            known.last_s = at_s
        elif command:  # kernel threads have none
            seen[key] = Seen(command[:2000], cpu if first else 0.0, cpu, comm, at_s, at_s)


def tally(seen: dict[tuple[int, str], Seen]) -> dict[str, tuple[float, int]]:
    """CPU seconds used during the census and processes, by role, the costliest first."""
    by_role: dict[str, tuple[float, int]] = {}
    for process in seen.values():
        used = process.used_s
        if used <= 0:
            continue
        role = role_of(process.command)
        cpu, count = by_role.get(role, (0.0, 0))
        by_role[role] = (cpu + used, count + 1)
    return dict(sorted(by_role.items(), key=lambda kv: -kv[1][0]))


def census(
    command: Sequence[str], interval_s: float = 1.0, sleep: Callable[[float], None] = time.sleep
) -> tuple[int, dict[str, object]]:
    """Run `command`, sampling until it ends: (its exit status, the census)."""
    seen: dict[tuple[int, str], Seen] = {}
    busy_from, started = machine_busy_s(), time.monotonic()
    sample(seen, first=True)
    process = subprocess.Popen(list(command))
    while process.poll() is None:
        sleep(interval_s)
        sample(seen, first=False, at_s=time.monotonic() - started)
    by_role = tally(seen)
    return process.returncode, {
        "command": list(command),
        "wall_s": round(time.monotonic() - started, 1),
        "machine_busy_cpu_s": round(machine_busy_s() - busy_from, 1),
        "by_role": {
            role: {"cpu_s": round(c, 1), "processes": n} for role, (c, n) in by_role.items()
        },
        "costliest": costliest(seen),
    }


def costliest(seen: dict[tuple[int, str], Seen], count: int = 60) -> list[dict[str, object]]:
    """The processes that used most CPU during the census: which broker, which test's driver."""
    ranked = sorted(seen.values(), key=lambda p: -p.used_s)[:count]
    return [
        {
            "cpu_s": round(p.used_s, 1),
            "role": role_of(p.command),
            "seen_s": [round(p.first_s), round(p.last_s)],
            "command": p.command[-400:],
        }
        for p in ranked
        if p.used_s > 0
    ]


def render(result: dict[str, object]) -> str:
    by_role: dict[str, dict[str, float]] = result["by_role"]  # type: ignore[assignment]
    counted = sum(r["cpu_s"] for r in by_role.values())
    busy = float(result["machine_busy_cpu_s"])  # type: ignore[arg-type]
    lines = [
        f"{result['wall_s']} s of wall time; the machine was busy {busy:.0f} CPU-s, "
        f"{counted:.0f} of them counted by role",
        "",
        "| CPU s | share | processes | role |",
        "|---:|---:|---:|---|",
    ]
    for role, row in by_role.items():
        share = row["cpu_s"] / busy if busy > 0 else 0.0
        lines.append(f"| {row['cpu_s']:.0f} | {share:.0%} | {row['processes']:.0f} | {role} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the census here as JSON")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: suite_census.py [OPTIONS] -- COMMAND [ARG...]")
    status, result = census(command, args.interval)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(render(result), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
