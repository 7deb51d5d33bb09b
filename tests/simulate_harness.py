"""Running `zkcdc simulate` as users run it."""

from __future__ import annotations

import os
import subprocess
import sys


def simulate(
    *args: str, timeout_s: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkcdc", "simulate", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )


def build_cluster(
    connect: str, brokers: int = 3, topics: int = 1, partitions: int = 3, rf: int = 3
) -> None:
    """A simulated cluster on `connect` (host:port/chroot); its brokers go down with the
    build process, as a cluster shut down."""
    built = simulate(
        "build", "--zookeeper", connect, "--brokers", str(brokers), "--topics", str(topics),
        "--partitions-per-topic", str(partitions), "--replication-factor", str(rf),
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
