"""B1: capture under a write storm of partition-state updates, zkcdc against a kazoo TreeCache.

Measures ZooKeeper's write ceiling here (several writer processes, nothing watching), then runs
the same storm flat out while `zkcdc capture` (a real daemon process publishing to Kafka) and a
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
import time
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.errors import StackError

STATE = '{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{},"isr":[1,2,3]}}'


def _paths(n: int) -> list[str]:
    return [f"/brokers/topics/storm-{i // 50}/partitions/{i % 50}/state" for i in range(n)]


def _writer(hosts: str, paths: list[str], until: float, window: int, out: Any) -> None:
    """Flat-out pipelined setData on its share of the paths until `until`."""
    client = KazooClient(hosts=hosts, timeout=30)
    client.start(timeout=30)
    writes, epoch, pending = 0, 0, []
    while time.time() < until:
        for path in paths:
            epoch += 1
            pending.append(client.set_async(path, STATE.format(epoch).encode()))
        if len(pending) >= window:
            for result in pending:
                result.get(timeout=30)
            writes += len(pending)
            pending = []
    for result in pending:
        result.get(timeout=30)
    writes += len(pending)
    client.stop()
    out.put(writes)


def storm(hosts: str, paths: list[str], writers: int, seconds: float) -> tuple[int, float]:
    queue: multiprocessing.Queue[int] = multiprocessing.Queue()
    until = time.time() + seconds
    started = time.time()
    procs = [
        multiprocessing.Process(target=_writer, args=(hosts, paths[w::writers], until, 400, queue))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    total = sum(queue.get() for _ in procs)
    for p in procs:
        p.join()
    return total, total / (time.time() - started)


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
    parser.add_argument("--out", type=Path, default=Path("bench/results/capture.json"))
    args = parser.parse_args()

    started_stack = False
    try:
        stack = LocalStack.open(StackSettings().state_dir)
        running = all(stack.running().values()) and bool(stack.running())
    except StackError:
        running = False
    if running:
        info = stack.info()
    else:
        stack = LocalStack(StackSettings())
        info = stack.up()
        started_stack = True
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

    _, ceiling = storm(hosts, paths, args.writers, min(args.duration, 10))
    print(f"ceiling, nothing watching: {ceiling:,.0f} writes/s", file=sys.stderr)
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
    _, rate = storm(hosts, paths, args.writers, args.duration)
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
        "ceiling_writes_per_s": round(ceiling),
        "storm_writes_per_s": round(rate),
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
