"""B2: `zkcdc simulate build` of a big cluster, then `zkcdc capture`'s snapshot of that tree.

Starts a stack of its own (other ports, so a running default stack is left alone; ZooKeeper
with a 1.5 GB heap, as a 200,000-partition tree needs more than the default 256 MB), builds
`--brokers` x `--topics` x `--partitions-per-topic` with replication factor 3 into `/sim`,
then starts `zkcdc capture` on it (event log only) and times it to "in sync", reading its peak
RSS (VmHWM) there. Results go to bench/results/simulate_build.json.

Run: `.venv/bin/python bench/simulate_build.py [--topics 200 --partitions-per-topic 1000]`
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # this folder would shadow the `capture` package

import argparse
import json
import signal
import subprocess
import tempfile
import time


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def zookeeper_rss_mb(state_dir: Path) -> float:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(state_dir).encode() in cmdline and b"QuorumPeerMain" in cmdline:
            return vm_hwm_mb(int(proc.name))
    return float("nan")


def main() -> None:
    from zkcdc.stack import LocalStack, StackSettings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions-per-topic", type=int, default=1000)
    parser.add_argument("--zookeeper-heap-mb", type=int, default=1536)
    parser.add_argument("--out", type=Path, default=Path("bench/results/simulate_build.json"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-sim-"))
    settings = StackSettings(
        state_dir=work / "stack",
        zookeeper_port=2381,
        kafka_port=9392,
        brokers=1,
        zookeeper_heap_mb=args.zookeeper_heap_mb,
    )
    stack = LocalStack(settings)
    info = stack.up()
    hosts = info.zookeeper_connect.split("/")[0] + "/sim"
    try:
        started = time.monotonic()
        build = subprocess.run(
            [sys.executable, "-m", "zkcdc", "simulate", "build", "--zookeeper", hosts,
             "--brokers", str(args.brokers), "--topics", str(args.topics),
             "--partitions-per-topic", str(args.partitions_per_topic),
             "--replication-factor", "3"],
            capture_output=True, text=True,
        )  # fmt: skip
        build_s = time.monotonic() - started
        if build.returncode != 0:
            raise SystemExit(f"build failed:\n{build.stdout}\n{build.stderr}")
        print(build.stdout, file=sys.stderr)

        log = work / "capture.log"
        started = time.monotonic()
        daemon = subprocess.Popen(
            [sys.executable, "-m", "zkcdc", "capture", "--zookeeper", hosts,
             "--cluster", "bench", "--state-dir", str(work / "state"),
             "--event-log", str(work / "events"), "--ha-path", "/zkcdc-bench-ha"],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        while b"in sync" not in log.read_bytes():
            if daemon.poll() is not None:
                raise SystemExit("capture exited:\n" + log.read_text())
            time.sleep(0.05)
        snapshot_s = time.monotonic() - started
        capture_rss = vm_hwm_mb(daemon.pid)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(120)
        in_sync = next(
            json.loads(line) for line in log.read_text().splitlines() if '"in sync"' in line
        )
        result = {
            "brokers": args.brokers,
            "topics": args.topics,
            "partitions": args.topics * args.partitions_per_topic,
            "znodes_written": 2 * args.topics * args.partitions_per_topic + 3 * args.topics,
            "build_s": round(build_s, 1),
            "capture_snapshot_s": round(snapshot_s, 1),
            "capture_peak_rss_mb": round(capture_rss),
            "zookeeper_peak_rss_mb": round(zookeeper_rss_mb(settings.state_dir)),
            "capture_in_sync_log": in_sync,
        }
    finally:
        stack.down()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
