"""B1: capture under a write storm of partition-state updates, zkcdc against a kazoo TreeCache.

Measures ZooKeeper's write ceiling here (several writer processes, nothing watching, swept over
the number of writes in flight per writer), then runs the storm flat out with `--window`
writes in flight per writer (32: past it the rate grows by a few per cent while each write's
own queueing in ZooKeeper, which counts in the lag, doubles with every doubling) while `zkcdc capture` (a real daemon process publishing to Kafka) and a
kazoo `TreeCache` listener (another process) watch the same znodes. Reports versions seen,
versions reported skipped, lag (ZooKeeper mtime -> observed) p50/p99/max and the daemon's CPU.

Run: `.venv/bin/python bench/capture.py [--duration 20] [--paths 200] [--writers 2]`
(starts the local stack if it is not running, and stops it again then).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and its name would shadow the
# `capture` package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from zkcdc.stack import StackSettings
from zkcdc.stack.cluster import running_or_started

STATE = '{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{},"isr":[1,2,3]}}'


def _paths(n: int) -> list[str]:
    return [f"/brokers/topics/storm-{i // 50}/partitions/{i % 50}/state" for i in range(n)]


def _writer(hosts: str, paths: list[str], until: float, window: int, out: Any) -> None:
    """Flat-out pipelined setData on its share of the paths until `until`, at most `window` in
    flight (a sliding window: a new write as soon as one is answered)."""
    client = KazooClient(hosts=hosts, timeout=30)
    client.start(timeout=30)
    slots = threading.Semaphore(window)
    latencies: list[float] = []
    epoch = 0
    while time.time() < until:
        for path in paths:
            slots.acquire()
            epoch += 1
            sent = time.perf_counter()
            result = client.set_async(path, STATE.format(epoch).encode())

            def answered(_: Any, sent: float = sent) -> None:
                latencies.append(time.perf_counter() - sent)
                slots.release()

            result.rawlink(answered)
    for _ in range(window):
        slots.acquire()
    client.stop()
    out.put(latencies)


def storm(
    hosts: str, paths: list[str], writers: int, window: int, seconds: float
) -> dict[str, Any]:
    """Runs the writers; returns writes, writes/s and the write latency p50/p99 in ms."""
    queue: multiprocessing.Queue[list[float]] = multiprocessing.Queue()
    until = time.time() + seconds
    started = time.time()
    procs = [
        multiprocessing.Process(
            target=_writer, args=(hosts, paths[w::writers], until, window, queue)
        )
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    latencies = [x * 1000 for _ in procs for x in queue.get()]
    for p in procs:
        p.join()
    return {
        "window": window,
        "writes": len(latencies),
        "writes_per_s": round(len(latencies) / (time.time() - started)),
        "write_ms_p50": round(percentile(latencies, 0.5), 1),
        "write_ms_p99": round(percentile(latencies, 0.99), 1),
    }


def ceiling(hosts: str, paths: list[str], writers: int, seconds: float) -> list[dict[str, Any]]:
    """ZooKeeper's write rate against the writers' window, nothing watching. A deeper pipeline
    than the knee adds only queueing (every write, and every read behind it, waits longer),
    not throughput."""
    sweep = []
    for window in (4, 8, 16, 32, 64, 128, 256):
        sweep.append(storm(hosts, paths, writers, window, seconds))
        print(f"ceiling sweep: {sweep[-1]}", file=sys.stderr)
    return sweep


def treecache_watcher(hosts: str, out_file: str) -> None:
    """The usual way: kazoo's TreeCache with a listener noting every version it sees."""
    from kazoo.recipe.cache import TreeCache, TreeEvent

    seen: list[tuple[str, int, int, int]] = []
    client = KazooClient(hosts=hosts, timeout=30)
    client.start(timeout=30)
    cache = TreeCache(client, "/")

    def listener(event: TreeEvent) -> None:
        if event.event_type == TreeEvent.NODE_UPDATED and event.event_data is not None:
            stat = event.event_data.stat
            seen.append((event.event_data.path, stat.version, stat.mtime, int(time.time() * 1000)))

    cache.listen(listener)
    cache.start()
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    Path(out_file + ".ready").touch()
    while not stop[0]:
        time.sleep(0.1)
    cache.close()
    client.stop()
    Path(out_file).write_text(json.dumps(seen))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--paths", type=int, default=200)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--no-kafka", action="store_true", help="event log only, no publishing")
    parser.add_argument("--watch-mode", choices=["recursive", "one-shot"], default="recursive")
    parser.add_argument("--window", type=int, default=32, help="writes in flight per writer")
    parser.add_argument("--sweep-s", type=float, default=6.0, help="seconds per ceiling step")
    parser.add_argument("--out", type=Path, default=Path("bench/results/capture.json"))
    args = parser.parse_args()

    stack, info, started_stack = running_or_started(StackSettings())
    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-"))
    chroot = f"/zkcdc-bench/capture-{int(time.time())}"
    hosts = info.zookeeper_hosts + chroot
    root = KazooClient(hosts=info.zookeeper_hosts)
    root.start(timeout=30)
    root.ensure_path(chroot)
    paths = _paths(args.paths)
    setup = KazooClient(hosts=hosts)
    setup.start(timeout=30)
    for path in paths:
        setup.create(path, STATE.format(0).encode(), makepath=True)

    sweep = ceiling(hosts, paths, args.writers, args.sweep_s)
    print(f"storm window: {args.window} in flight per writer", file=sys.stderr)
    start_versions = {p: setup.exists(p).version for p in paths}

    topic = f"zkcdc.bench.{int(time.time())}"
    log_file = (work / "capture.log").open("wb")
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zkcdc",
            "capture",
            "--zookeeper",
            hosts,
            "--cluster",
            "bench",
            "--state-dir",
            str(work / "state"),
            "--ha-path",
            f"/zkcdc-bench/ha-{int(time.time())}",
            "--watch-mode",
            args.watch_mode,
            *([] if args.no_kafka else ["--bootstrap-servers", info.bootstrap_servers]),
            *([] if args.no_kafka else ["--topic", topic]),
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    tree_out = str(work / "treecache.json")
    tree = multiprocessing.Process(target=treecache_watcher, args=(hosts, tree_out))
    tree.start()
    deadline = time.time() + 60
    while not (
        Path(tree_out + ".ready").exists() and b"in sync" in (work / "capture.log").read_bytes()
    ):
        if time.time() > deadline:
            raise SystemExit("watchers did not start:\n" + (work / "capture.log").read_text())
        time.sleep(0.2)
    time.sleep(2)  # TreeCache's initial load
    cpu_before = cpu_seconds(daemon.pid)
    during = storm(hosts, paths, args.writers, args.window, args.duration)
    time.sleep(3)  # let both drain
    cpu = cpu_seconds(daemon.pid) - cpu_before
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(60)
    os.kill(tree.pid, signal.SIGTERM)
    tree.join(60)
    end_versions = {p: setup.exists(p).version for p in paths}
    committed = sum(end_versions[p] - start_versions[p] for p in paths)

    from capture.event_log import read_records

    records = [
        r
        for r in read_records(work / "state" / "bench" / "events")
        if r["op"] == "UPDATE"
        and r["path"] in start_versions
        and r["after"]["version"] > start_versions[r["path"]]
    ]
    zk_seen = len(records)
    zk_skipped = sum(
        r["versions_skipped"]
        for r in records
        if r["before"]["version"] >= start_versions[r["path"]]
    )
    zk_lag = [r["captured_ms"] - r["ts_ms"] for r in records]
    tc = [
        (p, v, m, o)
        for p, v, m, o in json.loads(Path(tree_out).read_text())
        if p in start_versions and v > start_versions[p]
    ]
    tc_seen = len({(p, v) for p, v, _, _ in tc})
    tc_lag = [o - m for _, _, m, o in tc]
    result = {
        "paths": args.paths,
        "writers": args.writers,
        "duration_s": args.duration,
        "publishing_to_kafka": not args.no_kafka,
        "watch_mode": args.watch_mode,
        "ceiling_sweep": sweep,
        "ceiling_writes_per_s": max(s["writes_per_s"] for s in sweep),
        "storm_window": args.window,
        "storm": during,
        "storm_writes_per_s": during["writes_per_s"],
        "committed_versions": committed,
        "zkcdc": {
            "versions_seen": zk_seen,
            "versions_reported_skipped": zk_skipped,
            "accounted": zk_seen + zk_skipped,
            "seen_share": round(zk_seen / committed, 4) if committed else None,
            "lag_ms_p50": percentile(zk_lag, 0.5),
            "lag_ms_p99": percentile(zk_lag, 0.99),
            "lag_ms_max": max(zk_lag) if zk_lag else None,
            "cpu_s": round(cpu, 2),
            "cpu_share_of_one_core": round(cpu / (args.duration + 3), 3),
        },
        "treecache": {
            "versions_seen": tc_seen,
            "seen_share": round(tc_seen / committed, 4) if committed else None,
            "lag_ms_p50": percentile(tc_lag, 0.5),
            "lag_ms_p99": percentile(tc_lag, 0.99),
            "lag_ms_max": max(tc_lag) if tc_lag else None,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    root.delete(chroot, recursive=True)
    setup.stop()
    root.stop()
    if started_stack:
        stack.down()


if __name__ == "__main__":
    main()
