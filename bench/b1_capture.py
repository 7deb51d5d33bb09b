"""B1: capture under a storm of partition-state writes, zkcdc against a kazoo TreeCache, the write
rate swept up to ZooKeeper's ceiling on this machine.

1. The ceiling: `--writers` writer processes (pipelined `setData`), nothing watching, swept over
   the writes in flight per writer; the best rate is ZooKeeper's ceiling here.
2. The sweep: `zkcdc capture` (a real daemon publishing to Kafka) and a kazoo `TreeCache`
   listener (another process) watch the same znodes while the writers run at each target rate
   of `--rates` in turn, the last step flat out. Per step: versions committed, seen, reported
   skipped; lag (ZooKeeper mtime of the version -> the moment it was read) p50/p99/max; the
   daemon's CPU. py-spy profiles the daemon during the flat-out step.

Run: `.venv/bin/python bench/b1_capture.py [--quick] [--rates 100,250,500,1000,max]`
(starts the local stack if it is not running, and stops it again then).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness import (
    ZKCDC,
    cpu_seconds,
    figure,
    fmt,
    local_stack,
    parser,
    percentile,
    plot_link,
    profiled,
    reproduce,
    save,
    stop,
    table,
)
from kazoo.client import KazooClient

from zkcdc.ground import waiting

NAME = "b1_capture"
STATE = '{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{},"isr":[1,2,3]}}'


def _paths(n: int) -> list[str]:
    return [f"/brokers/topics/storm-{i // 50}/partitions/{i % 50}/state" for i in range(n)]


def _writer(
    hosts: str, paths: list[str], seconds: float, window: int, rate: float | None, out: Any
) -> None:
    """Pipelined setData round its paths for `seconds`, at most `window` in flight, paced to
    `rate` writes/s (None: flat out, a new write as soon as one is answered)."""
    client = KazooClient(hosts=hosts, timeout=30)
    client.start(timeout=30)
    slots = threading.Semaphore(window)
    latencies: list[float] = []
    committed: list[tuple[str, int, int]] = []  # (path, version, ms the write was answered)
    epoch, sent_count = 0, 0
    start = time.monotonic()
    until = start + seconds
    while time.monotonic() < until:
        for path in paths:
            if rate is not None:
                ahead = start + sent_count / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            if time.monotonic() >= until:
                break
            slots.acquire()
            epoch += 1
            sent_count += 1
            sent = time.perf_counter()

            def answered(result: Any, sent: float = sent, path: str = path) -> None:
                latencies.append(time.perf_counter() - sent)
                if result.successful():
                    committed.append((path, result.value.version, time.time_ns() // 1_000_000))
                slots.release()

            client.set_async(path, STATE.format(epoch).encode()).rawlink(answered)
    for _ in range(window):
        slots.acquire()
    client.stop()
    out.put((latencies, committed))


def storm(
    hosts: str,
    paths: list[str],
    writers: int,
    window: int,
    seconds: float,
    rate: float | None,
    commits: dict[tuple[str, int], int] | None = None,
) -> dict[str, Any]:
    """Runs the writers; returns writes, writes/s and the write latency p50/p99 in ms. Each
    write's answer time (when ZooKeeper had committed it) goes into `commits`, if given."""
    queue: multiprocessing.Queue[tuple[list[float], list[tuple[str, int, int]]]] = (
        multiprocessing.Queue()
    )
    started = time.monotonic()
    per_writer = None if rate is None else rate / writers
    procs = [
        multiprocessing.Process(
            target=_writer, args=(hosts, paths[w::writers], seconds, window, per_writer, queue)
        )
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    latencies: list[float] = []
    for _ in procs:
        spent, answered = queue.get()
        latencies += [x * 1000 for x in spent]
        if commits is not None:
            commits.update(((path, version), ms) for path, version, ms in answered)
    for p in procs:
        p.join()
    return {
        "target_per_s": rate,
        "window": window,
        "writes": len(latencies),
        "writes_per_s": round(len(latencies) / (time.monotonic() - started)),
        "write_ms_p50": _round(percentile(latencies, 0.5)),
        "write_ms_p99": _round(percentile(latencies, 0.99)),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


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
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    Path(out_file + ".ready").touch()
    while not stopped.wait(0.1):
        pass
    cache.close()
    client.stop()
    Path(out_file).write_text(json.dumps(seen))


def _versions(client: KazooClient, paths: list[str]) -> dict[str, int]:
    return {p: client.exists(p).version for p in paths}


def _step_figures(
    step: dict[str, Any],
    records: list[dict[str, Any]],
    cache_seen: list[tuple[str, int, int, int]],
    before: dict[str, int],
    after: dict[str, int],
    commits: dict[tuple[str, int], int],
) -> None:
    """Versions committed in the step: (before[p], after[p]] per path; who saw which. Lag is
    from the version's mtime (ZooKeeper stamps it before the write is logged and committed);
    "after commit" is from the moment ZooKeeper answered the write, what the watcher adds."""

    def in_step(path: str, version: int) -> bool:
        return path in before and before[path] < version <= after[path]

    mine = [r for r in records if in_step(r["path"], r["after"]["version"])]
    skipped = sum(r["versions_skipped"] for r in mine)
    lag = [r["captured_ms"] - r["ts_ms"] for r in mine]
    own = [
        r["captured_ms"] - commits[key]
        for r in mine
        if (key := (r["path"], r["after"]["version"])) in commits
    ]
    theirs = {(p, v): o - m for p, v, m, o in cache_seen if in_step(p, v)}
    theirs_own = [
        o - commits[(p, v)] for p, v, _, o in cache_seen if (p, v) in commits and in_step(p, v)
    ]
    committed = sum(after[p] - before[p] for p in before)
    step["committed"] = committed
    step["zkcdc"] = {
        "seen": len(mine),
        "reported_skipped": skipped,
        "accounted": len(mine) + skipped,
        "seen_share": round(len(mine) / committed, 4) if committed else None,
        "lag_ms_p50": percentile(lag, 0.5),
        "lag_ms_p99": percentile(lag, 0.99),
        "lag_ms_max": max(lag) if lag else None,
        "after_commit_ms_p50": percentile(own, 0.5),
        "after_commit_ms_p99": percentile(own, 0.99),
    }
    step["treecache"] = {
        "seen": len(theirs),
        "seen_share": round(len(theirs) / committed, 4) if committed else None,
        "lag_ms_p50": percentile(list(theirs.values()), 0.5),
        "lag_ms_p99": percentile(list(theirs.values()), 0.99),
        "lag_ms_max": max(theirs.values()) if theirs else None,
        "after_commit_ms_p50": percentile(theirs_own, 0.5),
        "after_commit_ms_p99": percentile(theirs_own, 0.99),
    }


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--duration", type=float, default=15.0, help="seconds per sweep step")
    p.add_argument("--rates", default="100,250,500,1000,max", help="target writes/s per step")
    p.add_argument("--paths", type=int, default=200)
    p.add_argument("--writers", type=int, default=2, help="writer processes")
    p.add_argument("--window", type=int, default=32, help="writes in flight per writer")
    p.add_argument("--ceiling-s", type=float, default=6.0, help="seconds per ceiling step")
    p.add_argument("--no-kafka", action="store_true", help="event log only, no publishing")
    p.add_argument("--watch-mode", choices=["recursive", "one-shot"], default="recursive")
    args = p.parse_args()
    if args.quick:
        args.duration, args.rates, args.ceiling_s = 4.0, "500,max", 2.0
    rates = [None if r == "max" else float(r) for r in args.rates.split(",")]
    windows = (8, 32, 128) if args.quick else (4, 8, 16, 32, 64, 128, 256)

    with local_stack() as info:
        work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b1-"))
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
        try:
            ceiling = []
            for window in windows:
                ceiling.append(storm(hosts, paths, args.writers, window, args.ceiling_s, None))
                print(f"ceiling: {ceiling[-1]}", flush=True)
            steps, floor = sweep(args, info, hosts, paths, rates, setup, work)
        finally:
            root.delete(chroot, recursive=True)
            setup.stop()
            root.stop()
    result = {
        "paths": args.paths,
        "writers": args.writers,
        "window": args.window,
        "step_s": args.duration,
        "publishing_to_kafka": not args.no_kafka,
        "watch_mode": args.watch_mode,
        "ceiling_sweep": ceiling,
        "ceiling_writes_per_s": max(s["writes_per_s"] for s in ceiling),
        "steps": steps,
        "floor": floor,
    }
    plot(result, args.quick)
    print(render(save(NAME, result, args.quick)))


def sweep(
    args: Any,
    info: Any,
    hosts: str,
    paths: list[str],
    rates: list[float | None],
    setup: KazooClient,
    work: Path,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rate steps with both watchers, then the floor steps (see below)."""
    topic = f"zkcdc.bench.{int(time.time())}"
    kafka = [] if args.no_kafka else ["--bootstrap-servers", info.bootstrap_servers]
    daemon = subprocess.Popen(
        [*ZKCDC, "capture", "--zookeeper", hosts, "--cluster", "bench",
         "--state-dir", str(work / "state"), "--ha-path", f"/zkcdc-bench/ha-{int(time.time())}",
         "--watch-mode", args.watch_mode, *kafka, *([] if args.no_kafka else ["--topic", topic])],
        stdout=(work / "capture.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    tree_out = str(work / "treecache.json")
    tree = multiprocessing.Process(target=treecache_watcher, args=(hosts, tree_out))
    tree.start()
    steps: list[dict[str, Any]] = []
    commits: dict[tuple[str, int], int] = {}
    marks: list[tuple[dict[str, int], dict[str, int]]] = []
    floor: list[dict[str, Any]] = []
    try:
        try:
            waiting.wait_until(
                lambda: Path(tree_out + ".ready").exists()
                and b"in sync" in (work / "capture.log").read_bytes(),
                60, what="the watchers to start", interval_s=0.2,
                abandon=lambda: None if daemon.poll() is None else "capture exited",
            )  # fmt: skip
        except waiting.WaitFailed as exc:
            raise SystemExit(f"{exc}:\n" + (work / "capture.log").read_text()) from None
        time.sleep(2)  # TreeCache's initial load
        for rate in rates:
            before = _versions(setup, paths)
            cpu = cpu_seconds(daemon.pid)
            flat_out = rate is None
            with (
                profiled(daemon.pid, NAME + "_daemon", args.quick, args.duration)
                if flat_out
                else _nothing()
            ):
                step = storm(hosts, paths, args.writers, args.window, args.duration, rate, commits)
            time.sleep(2)  # let both drain
            step["daemon_cpu_share"] = round(
                (cpu_seconds(daemon.pid) - cpu) / (args.duration + 2), 3
            )
            marks.append((before, _versions(setup, paths)))
            steps.append(step)
            print(f"step: {step}", flush=True)
        # The floor under any watcher's lag: ZooKeeper's own answer to the writer (its commit;
        # no watcher is told of a write before it), flat out with fewer writes in flight.
        floor = [
            storm(hosts, paths, args.writers, window, args.duration, None)
            for window in (1, 4)
            if window < args.window
        ]
        for step in floor:
            print(f"floor: {step}", flush=True)
    finally:
        stop(daemon)
        if tree.pid is not None:
            os.kill(tree.pid, signal.SIGTERM)
        tree.join(60)

    from zkcdc.capture.delivery.event_log import read_records

    records = [r for r in read_records(work / "state" / "bench" / "events") if r["op"] == "UPDATE"]
    cache_seen = [tuple(x) for x in json.loads(Path(tree_out).read_text())]
    for step, (before, after) in zip(steps, marks, strict=True):
        _step_figures(step, records, cache_seen, before, after, commits)
    return steps, floor


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def plot(result: dict[str, Any], quick: bool) -> None:
    steps = result["steps"]
    rate = [s["writes_per_s"] for s in steps]
    with figure(NAME, quick, size=(10, 4)) as fig:
        lag, share = fig.subplots(1, 2)
        for who, style, color in (("zkcdc", "o-", "C0"), ("treecache", "s--", "C1")):
            lag.plot(rate, [s[who]["lag_ms_p99"] for s in steps], style, color=color,
                     label=f"{who} p99")  # fmt: skip
            lag.plot(rate, [s[who]["lag_ms_p50"] for s in steps], style, color=color, alpha=0.4,
                     label=f"{who} p50")  # fmt: skip
            share.plot(rate, [100 * (s[who]["seen_share"] or 0) for s in steps], style,
                       color=color, label=who)  # fmt: skip
        lag.axhline(100, color="grey", linestyle=":", label="target p99 100 ms")
        lag.set(xlabel="writes/s reached", ylabel="lag ms (mtime -> read)", yscale="log",
                title="lag against write rate")  # fmt: skip
        share.set(xlabel="writes/s reached", ylabel="% of versions seen", ylim=(0, 105),
                  title="versions seen against write rate")  # fmt: skip
        lag.legend(fontsize=7)
        share.legend(fontsize=8)


def render(result: dict[str, Any]) -> str:
    ceiling = " · ".join(
        f"{s['window']}: {s['writes_per_s']:,}/s (p50 {s['write_ms_p50']} ms)"
        for s in result["ceiling_sweep"]
    )
    rows = []
    for s in result["steps"]:
        z, t = s["zkcdc"], s["treecache"]
        target = "max" if s["target_per_s"] is None else fmt(s["target_per_s"])
        rows.append([
            target, fmt(s["writes_per_s"]), fmt(s["committed"]),
            f"{fmt(z['seen'])} ({100 * (z['seen_share'] or 0):.0f} %)",
            fmt(z["reported_skipped"]),
            f"**{100 * z['accounted'] / s['committed']:.0f} %**" if s["committed"] else "—",
            f"{fmt(z['lag_ms_p50'])} / **{fmt(z['lag_ms_p99'])}** / {fmt(z['lag_ms_max'])}",
            f"{fmt(s['write_ms_p50'])} / {fmt(s['write_ms_p99'])}",
            f"{fmt(z.get('after_commit_ms_p50'))} / {fmt(z.get('after_commit_ms_p99'))}",
            f"{s['daemon_cpu_share']:.2f}",
            f"{fmt(t['seen'])} ({100 * (t['seen_share'] or 0):.0f} %)",
            f"{fmt(t['lag_ms_p50'])} / {fmt(t['lag_ms_p99'])} / {fmt(t['lag_ms_max'])}",
            f"{fmt(t.get('after_commit_ms_p50'))} / {fmt(t.get('after_commit_ms_p99'))}",
        ])  # fmt: skip
    header = ["target/s", "reached/s", "versions", "zkcdc seen", "zkcdc skipped (reported)",
              "zkcdc accounted", "zkcdc lag p50/p99/max ms", "write answered p50/p99 ms",
              "zkcdc after commit p50/p99 ms", "daemon CPU (cores)",
              "TreeCache seen", "TreeCache lag p50/p99/max ms", "TreeCache after commit p50/p99 ms"]  # fmt: skip
    return "\n\n".join([
        reproduce(result),
        f"ZooKeeper's write ceiling here ({result['writers']} writer processes, nothing watching; "
        f"writes in flight per writer: rate, write p50): {ceiling}. "
        f"Ceiling: **{result['ceiling_writes_per_s']:,} writes/s**.",
        f"Sweep: {result['paths']} partition-state znodes, {result['step_s']:g} s a step, "
        f"{result['window']} writes in flight per writer, zkcdc "
        f"{'publishing to Kafka' if result['publishing_to_kafka'] else 'event log only'} "
        f"({result['watch_mode']} watch) and TreeCache watching at once:",
        table(header, rows),
        plot_link(result, NAME, "B1: lag and versions seen against write rate"),
        "Flame graph of the daemon during the flat-out step: "
        + plot_link(result, NAME + "_daemon", "", "svg") + ".",
        *([
            "The floor under any watcher's lag, flat out with both watchers running and fewer "
            "writes in flight (ZooKeeper's answer to the writer is its commit; no watcher is "
            "told of a write before it): "
            + " · ".join(f"{s['window']} in flight per writer: {s['writes_per_s']:,}/s, write "
                         f"answered p50 {fmt(s['write_ms_p50'])} / **p99 "
                         f"{fmt(s['write_ms_p99'])} ms**" for s in result["floor"])
            + "."
        ] if result.get("floor") else []),
    ])  # fmt: skip


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    steps = result["steps"]
    top = steps[-1]
    accounted = all(s["zkcdc"]["accounted"] == s["committed"] for s in steps)
    # Where TreeCache sees every version there is no more to see: as many there, more elsewhere.
    more = all(
        s["zkcdc"]["seen"] > s["treecache"]["seen"]
        or s["zkcdc"]["seen"] == s["treecache"]["seen"] == s["committed"]
        for s in steps
    )
    p99 = top["zkcdc"]["lag_ms_p99"]
    return [
        ("every version accounted for (seen or reported skipped), every rate",
         f"{sum(s['zkcdc']['accounted'] for s in steps):,} of "
         f"{sum(s['committed'] for s in steps):,}", "all", accounted),
        ("more versions seen than TreeCache, every rate (all, where it sees all)",
         ", ".join(f"{s['zkcdc']['seen_share']:.0%} vs {s['treecache']['seen_share']:.0%}"
                   for s in steps), "more", more),
        (f"lag p99 at the ceiling (flat out: {top['writes_per_s']:,} writes/s)",
         f"{fmt(p99)} ms", "≤ 100 ms", p99 is not None and p99 <= 100),
    ]  # fmt: skip


if __name__ == "__main__":
    main()
