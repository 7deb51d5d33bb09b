"""B5: capture from ZooKeeper's transaction log (`--source txnlog`) on B1's storm, beside the
watch mode in the same run, and how fast the log files parse.

1. A stack of its own (one broker: the storm needs only ZooKeeper), B1's partition-state
   znodes in a chroot; B1's writers at each rate of `--rates`, the last flat out, twice:
   `zkcdc capture --source txnlog` beside `zkcdc capture` (watch), both publishing to Kafka
   (both modes on the same storm); then the txnlog capture alone, as it is deployed beside a
   ZooKeeper server; then alone with a core of its own (the capture pinned to one CPU, the
   writers, ZooKeeper, the broker and this script to the other). Per step: versions
   committed; records of each mode; txnlog lag, ZooKeeper's transaction time -> the record,
   and after the write's commit (its answer).
   Then the floor: the storm flat out with only a bare `LogReader` following the log (no
   decoding, no output), when each transaction became readable in the file at all.
2. Parsing: every `log.<zxid>` file the storm left, read with `zkcdc.capture.txnlog.transactions.read_entries`
   (best of 3), and the whole history turned into change records (`--from-txnlog`'s path).

Run: `.venv/bin/python bench/b5_txnlog.py [--quick] [--rates 100,500,1000,max]`
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

from b1_capture import STATE, _paths, _versions, storm
from harness import (
    ZKCDC,
    cpu_seconds,
    figure,
    fmt,
    own_stack,
    parser,
    percentile,
    pin,
    plot_link,
    reproduce,
    runqueue_seconds,
    save,
    stop,
    table,
)
from kazoo.client import KazooClient

from zkcdc.capture.txnlog.transactions import SET_DATA
from zkcdc.ground import waiting
from zkcdc.stack.processes import find_marked

NAME = "b5_txnlog"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--duration", type=float, default=20.0, help="seconds per step")
    p.add_argument("--rates", default="100,500,1000,max", help="target writes/s per step")
    p.add_argument("--paths", type=int, default=200)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--no-kafka", action="store_true", help="event logs only, no publishing")
    p.add_argument("--phases", default="beside_watch,alone,own_core,floor",
                   help="which phases to run")  # fmt: skip
    args = p.parse_args()
    if args.quick:
        args.duration, args.rates = 4.0, "500,max"
    rates = [None if r == "max" else float(r) for r in args.rates.split(",")]
    with own_stack(brokers=1) as info:
        work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b5-"))
        data_dir = info.state_dir / "zookeeper" / "1" / "data"
        chroot = "/b5"
        hosts = info.zookeeper_hosts + chroot
        setup = KazooClient(hosts=hosts)
        setup.start(timeout=30)
        setup.ensure_path("/")
        setup.create("/cluster/id", b'{"version":"1","id":"b5"}', makepath=True)
        paths = _paths(args.paths)
        for path in paths:
            setup.create(path, STATE.format(0).encode(), makepath=True)
        phases = {
            phase: run_steps(args, info, hosts, data_dir, paths, rates, setup, work, phase)
            for phase in args.phases.split(",")
            if phase != "floor" and (phase != "own_core" or _cores() >= 2)
        }
        floor = (
            floor_steps(args, hosts, data_dir, paths, [None], setup, work, chroot)
            if "floor" in args.phases.split(",")
            else []
        )
        setup.stop()
        parsing = parse_rates(data_dir, chroot)
    result = {
        "publishing_to_kafka": not args.no_kafka,
        "paths": args.paths,
        "writers": args.writers,
        "window": args.window,
        "step_s": args.duration,
        "phases": phases,
        "floor": floor,
        "parsing": parsing,
    }
    plot(result, args.quick)
    print(render(save(NAME, result, args.quick)))


def bare_reader(version_dir: str, after_zxid: int, out_file: str) -> None:
    """The floor of any log reader here: zkcdc's LogReader alone (no decoding, no records, no
    output) polling every millisecond, noting when each setData became readable in the file."""
    from zkcdc.capture.txnlog.data_dir import LogReader

    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    seen: list[tuple[str, int, int, int]] = []  # (path, version, txn time, readable at)
    reader = LogReader(Path(version_dir), after_zxid, lambda damage: None)
    Path(out_file + ".ready").touch()
    while not stopped.is_set():
        batch = reader.poll()
        readable = time.time_ns() // 1_000_000
        for txn in batch:
            for op in txn.ops:
                if op.type == SET_DATA and op.path is not None and op.version is not None:
                    seen.append((op.path, op.version, txn.time_ms, readable))
        if not batch:
            time.sleep(0.001)
    reader.close()
    Path(out_file).write_text(json.dumps(seen))


def floor_steps(
    args: Any,
    hosts: str,
    data_dir: Path,
    paths: list[str],
    rates: list[float | None],
    setup: KazooClient,
    work: Path,
    chroot: str,
) -> list[dict[str, Any]]:
    """The same storm with only the bare reader following the log: how late a transaction
    becomes readable at all (ZooKeeper's own pipeline and its fsyncs, on these cores)."""
    from zkcdc.capture.txnlog.data_dir import log_files, version_dir

    directory = version_dir(data_dir)
    newest = log_files(directory)[-1]
    out = str(work / "bare.json")
    reader = multiprocessing.Process(target=bare_reader,
                                     args=(str(directory), zxid_now(newest), out))  # fmt: skip
    reader.start()
    steps: list[dict[str, Any]] = []
    marks = []
    try:
        try:
            waiting.wait_until(Path(out + ".ready").exists, 60, what="the bare reader to start")
        except waiting.WaitFailed as exc:
            raise SystemExit(str(exc)) from None
        time.sleep(2)  # past what was in the log already
        for rate in rates:
            before = _versions(setup, paths)
            steps.append(storm(hosts, paths, args.writers, args.window, args.duration, rate))
            time.sleep(2)
            marks.append((before, _versions(setup, paths)))
            print(f"floor step: {steps[-1]}", flush=True)
    finally:
        reader.terminate()  # SIGTERM: it writes what it saw
        reader.join(60)
    seen = [tuple(x) for x in json.loads(Path(out).read_text())]
    for step, (before, after) in zip(steps, marks, strict=True):
        lag = [
            readable - ts
            for path, version, ts, readable in seen
            if path.startswith(chroot + "/")
            and (p := path[len(chroot) :]) in before
            and before[p] < version <= after[p]
        ]
        step["committed"] = sum(after[p] - before[p] for p in before)
        step["bare"] = {
            "seen": len(lag),
            "lag_ms_p50": percentile(lag, 0.5),
            "lag_ms_p99": percentile(lag, 0.99),
            "lag_ms_max": max(lag) if lag else None,
        }
    return steps


def zxid_now(log_file: Path) -> int:
    """The last zxid written in a log file so far (0 if none)."""
    from zkcdc.capture.txnlog.transactions import Txn, read_entries

    last = 0
    for item in read_entries(log_file.read_bytes()):
        if isinstance(item, Txn):
            last = item.zxid
    return last


def _cores() -> int:
    """CPUs this script may use (a core of its own for the capture needs two)."""
    return len(os.sched_getaffinity(0))


def _daemon(
    work: Path,
    name: str,
    args: list[str],
    info: Any,
    hosts: str,
    kafka: bool,
    cpus: set[int] | None = None,
) -> subprocess.Popen[Any]:
    publish = ["--bootstrap-servers", info.bootstrap_servers, "--topic", f"zkcdc.bench.{name}"]
    return subprocess.Popen(
        [*ZKCDC, "capture", "--zookeeper", hosts, "--cluster", name, "--state-dir",
         str(work / name), "--ha-path", f"/zkcdc-bench/ha-{name}", *(publish if kafka else []),
         *args],
        stdout=(work / f"{name}.log").open("wb"), stderr=subprocess.STDOUT,
        preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
    )  # fmt: skip


def _wait_logged(process: subprocess.Popen[Any], log: Path, text: bytes) -> None:
    try:
        waiting.wait_until(
            lambda: text in log.read_bytes(), 60, what="capture to start", interval_s=0.2,
            abandon=lambda: None if process.poll() is None else "it exited",
        )  # fmt: skip
    except waiting.WaitFailed as exc:
        raise SystemExit(f"{exc}:\n{log.read_text()}") from None


def _wait_caught_up(events: Path, versions: dict[str, int], kafka: bool, cluster: str) -> None:
    """Until the daemon's event log holds every version written so far and, publishing, Kafka
    has acknowledged all it logged (its checkpoint's `delivered`): a new daemon reads the
    earlier phases' storm first, and its steps must not meet that backlog still being sent."""
    from zkcdc.capture.delivery.checkpoint import CheckpointStore
    from zkcdc.capture.delivery.event_log import read_records

    def logged_through() -> tuple[int] | None:
        """The log's last seq once it holds every version; None before."""
        seen: dict[str, int] = {}
        last = -1
        if events.exists():
            for r in read_records(events, lambda damage: None):  # a block being written
                last = max(last, r["seq"])
                if r["after"] is not None and r["path"] in versions:
                    seen[r["path"]] = max(seen.get(r["path"], 0), r["after"]["version"])
        return (last,) if all(seen.get(p, -1) >= v for p, v in versions.items()) else None

    checkpoint = CheckpointStore(events.parent, events, cluster)
    try:
        (last,) = waiting.wait_until(logged_through, 300, what="the txnlog capture to catch up",
                                     interval_s=1)  # fmt: skip
        if kafka:
            waiting.wait_until(lambda: checkpoint.delivered() >= last, 300,
                               what="the txnlog capture's backlog on Kafka", interval_s=0.5)  # fmt: skip
    except waiting.WaitFailed as exc:
        raise SystemExit(str(exc)) from None


def run_steps(
    args: Any,
    info: Any,
    hosts: str,
    data_dir: Path,
    paths: list[str],
    rates: list[float | None],
    setup: KazooClient,
    work: Path,
    phase: str,
) -> list[dict[str, Any]]:
    kafka = not args.no_kafka
    name, beside = f"txnlog-{phase}", phase == "beside_watch"
    everything = os.sched_getaffinity(0)
    own_core = phase == "own_core"
    stack_and_me = [os.getpid(), *find_marked(info.state_dir)] if own_core else []
    if own_core:
        # The capture on the last CPU; this script, its writers (started later, they inherit)
        # and the stack on the others: what a capture beside a ZooKeeper server on a machine
        # of its own has, which the storm's load generators here otherwise take.
        pin(stack_and_me, everything - {max(everything)})
    txnlog = _daemon(work, name, ["--source", "txnlog", "--zk-data-dir", str(data_dir)],
                     info, hosts, kafka, {max(everything)} if own_core else None)  # fmt: skip
    watch = _daemon(work, "watch", [], info, hosts, kafka) if beside else None
    steps: list[dict[str, Any]] = []
    commits: dict[tuple[str, int], int] = {}
    marks = []
    try:
        _wait_logged(txnlog, work / f"{name}.log", b'"capturing"')
        # A new daemon reads the log from its start: the earlier phase's storm first.
        _wait_caught_up(work / name / name / "events", _versions(setup, paths), kafka, name)
        if watch is not None:
            _wait_logged(watch, work / "watch.log", b'"in sync"')
        time.sleep(2)
        for rate in rates:
            before = _versions(setup, paths)
            cpu, waited = cpu_seconds(txnlog.pid), runqueue_seconds(txnlog.pid)
            step = storm(hosts, paths, args.writers, args.window, args.duration, rate, commits)
            time.sleep(2)
            step["txnlog_cpu_share"] = round(
                (cpu_seconds(txnlog.pid) - cpu) / (args.duration + 2), 3
            )
            # The main thread's time runnable but not running: what the cores' other work
            # (writers, ZooKeeper, broker) costs the capture, as a share of the step.
            step["txnlog_runqueue_share"] = round(
                (runqueue_seconds(txnlog.pid) - waited) / (args.duration + 2), 3
            )
            marks.append((before, _versions(setup, paths)))
            steps.append(step)
            print(f"step: {step}", flush=True)
    finally:
        stop(txnlog)
        if watch is not None:
            stop(watch)
        if own_core:
            pin(stack_and_me, everything)

    from zkcdc.capture.delivery.event_log import read_records

    exact = [r for r in read_records(work / name / name / "events") if r["op"] == "UPDATE"]
    watched = (
        []
        if watch is None
        else [r for r in read_records(work / "watch" / "watch" / "events") if r["op"] == "UPDATE"]
    )
    for step, (before, after) in zip(steps, marks, strict=True):
        _figures(step, exact, watched, before, after, commits)
    return steps


def _figures(
    step: dict[str, Any],
    exact: list[dict[str, Any]],
    watched: list[dict[str, Any]],
    before: dict[str, int],
    after: dict[str, int],
    commits: dict[tuple[str, int], int],
) -> None:
    def in_step(r: dict[str, Any]) -> bool:
        path = r["path"]
        return path in before and before[path] < r["after"]["version"] <= after[path]

    mine = [r for r in exact if in_step(r)]
    seen = [r for r in watched if in_step(r)]
    zxids = [r["zxid"] for r in mine]
    lag = [r["captured_ms"] - r["ts_ms"] for r in mine]
    after_commit = [
        r["captured_ms"] - commits[key]
        for r in mine
        if (key := (r["path"], r["after"]["version"])) in commits
    ]
    step["committed"] = sum(after[p] - before[p] for p in before)
    step["txnlog"] = {
        "records": len(mine),
        "zxid_ordered": zxids == sorted(zxids) and len(set(zxids)) == len(zxids),
        "versions_skipped": sum(r["versions_skipped"] for r in mine),
        "lag_ms_p50": percentile(lag, 0.5),
        "lag_ms_p99": percentile(lag, 0.99),
        "lag_ms_max": max(lag) if lag else None,
        "after_commit_ms_p50": percentile(after_commit, 0.5),
        "after_commit_ms_p99": percentile(after_commit, 0.99),
    }
    step["watch"] = {
        "records": len(seen),
        "reported_skipped": sum(r["versions_skipped"] for r in seen),
    }


def parse_rates(data_dir: Path, chroot: str) -> dict[str, Any]:
    from zkcdc.capture.txnlog.data_dir import log_files, version_dir
    from zkcdc.capture.txnlog.history import history
    from zkcdc.capture.txnlog.transactions import Txn, read_entries

    files = log_files(version_dir(data_dir))
    blobs = [f.read_bytes() for f in files]
    best, txns = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        txns = sum(1 for blob in blobs for t in read_entries(blob) if isinstance(t, Txn))
        best = min(best, time.perf_counter() - started)
    started = time.perf_counter()
    records = sum(1 for _ in history(data_dir, chroot, None, print, print))
    records_s = time.perf_counter() - started
    return {
        "files": len(files),
        "bytes_written": sum(len(b.rstrip(b"\0")) for b in blobs),
        "transactions": txns,
        "parse_s": round(best, 3),
        "transactions_per_s": round(txns / best),
        "history_records": records,
        "history_s": round(records_s, 2),
        "history_records_per_s": round(records / records_s),
    }


def plot(result: dict[str, Any], quick: bool) -> None:
    with figure(NAME, quick) as fig:
        ax = fig.subplots()
        for phase, style, color in (
            ("alone", "o-", "C0"),
            ("beside_watch", "s--", "C1"),
            ("own_core", "^:", "C2"),
        ):
            steps = result["phases"].get(phase, [])
            rate = [s["writes_per_s"] for s in steps]
            ax.plot(rate, [s["txnlog"]["lag_ms_p99"] for s in steps], style, color=color,
                    label=f"p99, {PHASES[phase]}")  # fmt: skip
            ax.plot(rate, [s["txnlog"]["lag_ms_p50"] for s in steps], style, color=color,
                    alpha=0.4, label=f"p50, {PHASES[phase]}")  # fmt: skip
        ax.axhline(20, color="grey", linestyle=":", label="target p99 20 ms")
        ax.set(xlabel="writes/s reached", ylabel="ms (ZooKeeper's txn time -> record)",
               yscale="log", title="txnlog capture lag against write rate")  # fmt: skip
        ax.legend(fontsize=7)


PHASES = {
    "beside_watch": "beside the watch mode",
    "alone": "alone",
    "own_core": "alone with a core of its own",
}


def _table(steps: list[dict[str, Any]], beside: bool) -> str:
    rows = []
    for s in steps:
        t, w = s["txnlog"], s["watch"]
        target = "max" if s["target_per_s"] is None else fmt(s["target_per_s"])
        row = [
            target, fmt(s["writes_per_s"]), fmt(s["committed"]),
            f"**{fmt(t['records'])}**", "yes" if t["zxid_ordered"] else "**no**",
            f"{fmt(t['lag_ms_p50'])} / **{fmt(t['lag_ms_p99'])}** / {fmt(t['lag_ms_max'])}",
            f"{fmt(t['after_commit_ms_p50'])} / {fmt(t['after_commit_ms_p99'])}",
            f"{fmt(s['write_ms_p50'])} / {fmt(s['write_ms_p99'])}",
            f"{s['txnlog_cpu_share']:.2f}",
            _share(s.get("txnlog_runqueue_share")),
        ]  # fmt: skip
        if beside:
            row += [fmt(w["records"]), fmt(w["reported_skipped"])]
        rows.append(row)
    header = ["target/s", "reached/s", "versions committed", "txnlog records", "zxid order",
              "txnlog lag p50/p99/max ms", "after commit p50/p99 ms",
              "ZooKeeper write answered p50/p99 ms", "txnlog CPU (cores)",
              "txnlog main thread waiting for a CPU"]  # fmt: skip
    if beside:
        header += ["watch records", "watch skipped (reported)"]
    return table(header, rows)


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"


def render(result: dict[str, Any]) -> str:
    parsing = result["parsing"]
    phases = result["phases"]
    return "\n\n".join([
        reproduce(result),
        f"{result['paths']} partition-state znodes, {result['step_s']:g} s a step, B1's "
        f"writers ({result['writers']} processes, {result['window']} writes in flight each), "
        f"{'publishing to Kafka' if result.get('publishing_to_kafka', True) else 'event logs only'}"
        ". Lag is the record's `captured_ms` minus the transaction's time in ZooKeeper's log "
        "(`ts_ms`); after commit, minus the moment the writer had its answer.",
        *(
            part
            for phase, title in (
                ("beside_watch", "Both modes on the same storm (the txnlog capture beside the "
                                 "watch capture):"),
                ("alone", "The txnlog capture alone (as deployed, beside a ZooKeeper server):"),
                ("own_core", "The txnlog capture alone with a core of its own (pinned to one CPU; "
                             "the writers, ZooKeeper, the broker and the benchmark on the other, "
                             "so the storm's flat-out rate is what one core can write):"),
            )
            if phase in phases
            for part in (title, _table(phases[phase], beside=phase == "beside_watch"))
        ),
        *(
            [
                "The floor under any log reader's lag, the same storm flat out with nothing but a "
                "bare reader following the log (zkcdc's `LogReader` polling every millisecond: no "
                "decoding, no records, no output): "
                + " · ".join(
                    f"{s['writes_per_s']:,} writes/s: a transaction readable in the file "
                    f"p50 {fmt(s['bare']['lag_ms_p50'])} / **p99 {fmt(s['bare']['lag_ms_p99'])}**"
                    f" / max {fmt(s['bare']['lag_ms_max'])} ms after its time "
                    f"({fmt(s['bare']['seen'])} of {fmt(s['committed'])} seen)"
                    for s in result["floor"]
                )
                + "."
            ]
            if result.get("floor")
            else []
        ),
        plot_link(result, NAME, "B5: txnlog capture lag against write rate"),
        f"Parsing the {parsing['files']} log files the run left "
        f"({parsing['bytes_written'] / 1e6:.1f} MB written): "
        f"**{parsing['transactions_per_s']:,} transactions/s** "
        f"({parsing['transactions']:,} in {parsing['parse_s']} s, best of 3); the whole "
        f"history as change records (snapshot, every transaction applied and decoded, as "
        f"`--from-txnlog` does): {parsing['history_records_per_s']:,} records/s "
        f"({parsing['history_records']:,} in {parsing['history_s']} s).",
    ])  # fmt: skip


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    steps = [s for phase in result["phases"].values() for s in phase]
    exact = all(s["txnlog"]["records"] == s["committed"] and s["txnlog"]["zxid_ordered"]
                for s in steps)  # fmt: skip
    rows = [
        ("txnlog: every committed version recorded, in zxid order (every phase)",
         f"{sum(s['txnlog']['records'] for s in steps):,} of "
         f"{sum(s['committed'] for s in steps):,}", "= committed", exact),
    ]  # fmt: skip
    for phase, steps in result["phases"].items():
        paced = [s for s in steps if s["target_per_s"] is not None]
        for what, chosen in (
            (f"paced rates up to {max((s['target_per_s'] for s in paced), default=0):g}/s",
             paced),
            (f"flat out ({steps[-1]['writes_per_s']:,} writes/s)",
             [s for s in steps[-1:] if s["target_per_s"] is None]),
        ):  # fmt: skip
            if not chosen:
                continue  # a run without that kind of step (--rates)
            p99 = max(s["txnlog"]["lag_ms_p99"] or 0 for s in chosen)
            rows.append((f"txnlog lag p99, {PHASES[phase]}, {what}", f"{p99:g} ms",
                         "≤ 20 ms", p99 <= 20))  # fmt: skip
    rate = result["parsing"]["transactions_per_s"]
    rows.append(("transaction log parsed", f"{rate:,} txn/s", "≥ 100,000 txn/s",
                 rate >= 100_000))  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
