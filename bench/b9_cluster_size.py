"""B9: the alert job against the cluster's size. Latency p50/p99 at 40, 10,000, 100,000 and
1,000,000 partitions (`--no-million`: not that one) in one run, as B3 measures it: a simulated cluster,
`zkcdc capture` and `zkcdc stream alerts` as users run them, partitions taken offline one at a
time 0.5 s apart, each `offline_partition` alert on the alerts topic timed against its state
znode's mtime. At each size, once the timed incidents are done, the job is stopped and
another started on a new checkpoint against the cluster capture keeps in sync, a partition
taken offline as it starts: its alert's arrival after the new job's start is the time a job
started against a cluster of that size is blind (the whole changes topic read first). Then
the stateful stage's records/s on B3's records (the stage alone, from
Spark's event log, and the whole micro-batch) on local[1] and local[2] and on a standalone
cluster (by default a master and two workers of one core each on this machine, started and
stopped by the run; `--standalone spark://host:port` for a cluster of yours, `--standalone
none` for neither), and the state store's size per partition. A broker failure at 1,000,000
partitions is `b9_broker_failure.py`. Before the first size the stack serves one small capture
and alert job, not measured (`--no-stack-warm-up`: none), as a user's long-running Kafka and
ZooKeeper have.

Run: `.venv/bin/python bench/b9_cluster_size.py [--quick] [--shards auto|N] [--no-million]`
(a stack of its own: one broker, ZooKeeper with a 6 GB heap, which 1,000,000 partitions need;
removed at the end). The 1,000,000-partition cluster takes ~25 min of it: the build, capture's
snapshot of its 2,000,000 znodes, the job reading them, and the second job reading them again.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from b3_alert_job import latency, throughput
from harness import directory_mb, figure, fmt, own_stack, parser, plot_link, reproduce, save, table
from latency_budget import PART_NAMES, PARTS

from zkcdc.streaming.job.checkpoint_layout import auto_shards

NAME = "b9_cluster_size"
INCIDENTS = 31  # the first one waits for the job to be up; 30 are timed


def sizes(quick: bool, million: bool, only: str = "") -> list[tuple[int, int]]:
    """(topics, partitions per topic) of each cluster measured (`only`: "40,10000", ...)."""
    if only:
        return [(max(1, n // 1000), min(n, 1000)) for n in map(int, only.split(","))]
    if quick:
        return [(1, 40), (10, 1000)]
    return [(1, 40), (10, 1000), (100, 1000)] + ([(1000, 1000)] if million else [])


# A 1,000,000-partition tree in ZooKeeper: ~5.4 GB of RSS at a 6 GB heap (2026-11-27).
ZOOKEEPER_HEAP_MB = 6144
# A daemon's first minutes: the driver JVM's compilers are still at work (C2 took ~60 % of a
# core in the first minute), and a micro-batch at 40 partitions went from ~970 ms in the first
# 15 to ~400 ms after ~120 (2026-11-27). Users run the job for days: the warm figures are its
# latency; the just-started ones are shown beside them.
WARMUP_S = 120
# Before the first size, the stack serves one capture and alert job that nothing is measured
# of: a user's Kafka and ZooKeeper have run for long, and only capture and the job start cold.
# Without it the first size measured the brokers' own start too (its job's first micro-batches
# ~0.5-0.65 s against ~0.4 s at the next size, 2026-12-04).
STACK_WARM_UP_INCIDENTS = 6


@contextmanager
def standalone(how: str) -> Iterator[list[tuple[str, str]]]:
    """(master, label) of the standalone cluster to measure on: none, one given, or (auto) a
    master and two workers of one core each started here, as a 2-machine cluster would be."""
    if how in ("", "none"):
        yield []
    elif how != "auto":
        yield [(how, how)]
    else:
        from zkcdc.stack.probes import free_port_block
        from zkcdc.stack.spark_standalone import SparkStandalone

        port = free_port_block(2)  # the master's and its web UI's
        work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b9-spark-"))
        cluster = SparkStandalone(work, port, port + 1, cores=1, workers=2)
        try:
            yield [(cluster.master_url, "standalone, 2 workers x 1 core")]
        finally:
            cluster.stop()


def main() -> None:
    p = parser(__doc__)
    p.add_argument(
        "--shards",
        default="auto",
        help="the job's --shards: auto (its default), or N (0: one group)",
    )
    p.add_argument("--no-million", action="store_true", help="not 1,000,000 partitions")
    p.add_argument(
        "--standalone",
        default="auto",
        help="the throughput on a standalone cluster too: auto (two 1-core workers here), "
        "spark://host:port, or none",
    )
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--sizes", default="", help="partitions of each cluster, e.g. 40,100000")
    p.add_argument("--no-throughput", action="store_true")
    p.add_argument("--job-arg", action="append", default=[], help="one more flag for the job")
    p.add_argument("--zookeeper-heap-mb", type=int, default=ZOOKEEPER_HEAP_MB)
    p.add_argument(
        "--no-stack-warm-up",
        action="store_true",
        help="measure the first size on a stack that has served nothing yet",
    )
    p.add_argument(
        "--warmup-s",
        type=float,
        default=WARMUP_S,
        help="changes before the warm incidents (0: the just-started ones only)",
    )
    args = p.parse_args()
    if args.quick:
        args.records = 100_000
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    job = ("--driver-memory", "3g", "--shards", str(args.shards), *args.job_arg)
    result: dict[str, Any] = {
        "shards": args.shards,
        "sizes": [],
        "throughput": [],
        "warmup_s": args.warmup_s,
        "stack_warm_up": not args.no_stack_warm_up,
    }
    with own_stack(brokers=1, zookeeper_heap_mb=args.zookeeper_heap_mb) as info:
        if not args.no_stack_warm_up:
            print("the stack's warm-up (not measured)", file=sys.stderr, flush=True)
            latency(info, STACK_WARM_UP_INCIDENTS, Path(tempfile.mkdtemp(prefix="zkcdc-bench-b9-")),
                    job_args=job)  # fmt: skip
        for topics, per_topic in sizes(args.quick, not args.no_million, args.sizes):
            work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b9-"))
            partitions = topics * per_topic
            print(f"latency at {partitions:,} partitions", file=sys.stderr, flush=True)
            measured = latency(
                info, INCIDENTS, work, topics=topics, partitions_per_topic=per_topic,
                job_args=job, first_alert_s=120 + partitions / 500, clean=partitions <= 1000,
                warmup_s=args.warmup_s, budget=True, fresh_job=True,
            )  # fmt: skip
            checkpoint = work / "alerts-checkpoint" / "alerts"
            measured.update(
                partitions=partitions,
                checkpoint_mb=round(directory_mb(checkpoint), 1),
                state_mb=round(directory_mb(checkpoint / "state"), 1),
            )
            result["sizes"].append(measured)
            print(f"  just started: p50 {measured['p50_ms']} ms p99 {measured['p99_ms']} ms",
                  file=sys.stderr)  # fmt: skip
            if "warm" in measured:
                warm = measured["warm"]
                print(f"  warm: p50 {warm['p50_ms']} ms p99 {warm['p99_ms']} ms", file=sys.stderr)
        masters = [] if args.no_throughput else ["local[1]", "local[2]"]
        with standalone(args.standalone if masters else "") as cluster:
            for master, label in [(m, m) for m in masters] + cluster:
                print(f"throughput on {label}", file=sys.stderr, flush=True)
                shards = auto_shards(master) if args.shards == "auto" else int(args.shards)
                t = throughput(info.bootstrap_servers, args.records, 1000, 50_000, master, shards)
                result["throughput"].append({"master": label, **t})
    plot(result, args.quick)
    print(render(save(NAME, result, args.quick)))


def plot(result: dict[str, Any], quick: bool) -> None:
    with figure(NAME, quick, size=(10, 4)) as fig:
        lat, rate = fig.subplots(1, 2)
        xs = [s["partitions"] for s in result["sizes"]]
        for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            if all("warm" in s for s in result["sizes"]):
                lat.plot(
                    xs, [s["warm"][key] for s in result["sizes"]], "o-", label=f"{label}, warm"
                )
            lat.plot(xs, [s[key] for s in result["sizes"]], "o--", label=f"{label}, just started")
        lat.axhline(1500, color="grey", linestyle=":", label="p99 target 1.5 s")
        lat.set(xscale="log", xlabel="partitions", ylabel="ms, mtime -> alert on Kafka",
                title="alert latency against cluster size")  # fmt: skip
        lat.legend(fontsize=8)
        t = result["throughput"]
        at = range(len(t))
        rate.bar([i - 0.2 for i in at], [stage_rate(x) or 0 for x in t], 0.4,
                 label="the stateful stage alone")  # fmt: skip
        rate.bar([i + 0.2 for i in at], [x["records_per_s"] or 0 for x in t], 0.4,
                 label="whole micro-batch (Kafka read, decoding, routing, stateful stage)")  # fmt: skip
        # "standalone, 2 workers x 1 core" on one line ran into its neighbour's label
        rate.set_xticks(list(at), [x["master"].replace(", ", ",\n") for x in t])
        rate.set(ylabel="records/s (micro-batches after the first)",
                 title=f"B3's records, --shards {result['shards']}")  # fmt: skip
        rate.legend(fontsize=8)


def stage_rate(t: dict[str, Any]) -> float | None:
    """The stateful stage's own records/s (runs before 2026-11-29 measured only the batch)."""
    return (t.get("stateful_stage") or {}).get("records_per_s")


def latency_row(partitions: str, when: str, s: dict[str, Any], incidents: int) -> list[str]:
    first = s.get("first_alert_s")  # runs before 2026-12-03 did not record it
    in_sync = s.get("capture_in_sync_s")  # nor, before 2026-12-04, capture's in-sync moment
    fresh = s.get("fresh_job_first_alert_s")  # nor a job started against the cluster in sync
    return [partitions, when, f"{fmt(s['p50_ms'])} ms", f"**{fmt(s['p99_ms'])} ms**",
            f"{s['alerts_received']}/{incidents}",
            f"{fmt(s['micro_batch_ms_p50'])} / {fmt(s['micro_batch_ms_max'])} ms",
            "" if first is None else f"{first:.0f} s",
            "" if in_sync is None else f"{in_sync:.0f} s",
            "" if fresh is None else f"**{fresh:.0f} s**"]  # fmt: skip


def render(result: dict[str, Any]) -> str:
    rows = []
    for s in result["sizes"]:
        size = f"{s['partitions']:,}"
        rows.append(latency_row(size, "just started", s, s["incidents"]))
        if "warm" in s:
            rows.append(latency_row(size, f"warm ({s['warm']['warmup_s']:.0f} s in)",
                                    s["warm"], s["incidents"]))  # fmt: skip
    store = [
        [f"{s['partitions']:,}",
         f"{s['state_mb']} MB ({1e6 * s['state_mb'] / s['partitions']:,.0f} B a partition)",
         f"{s['checkpoint_mb']} MB"]
        for s in result["sizes"]
    ]  # fmt: skip
    warm = result.get("warmup_s") or 0
    parts = [
        reproduce(result),
        f"The alert job with `--shards {result['shards']}` (`--driver-memory 3g`, its default "
        f"trigger). Latency: {INCIDENTS - 1} partitions taken offline one at a time, 0.5 s apart, "
        "on a simulated cluster of each size (3 simulated brokers, replication factor 3), "
        "right after the job's first alert (just started)"
        + (
            f", then, after {warm:.0f} s of the same partitions going online and offline in "
            "turn, again (warm: a daemon past its first minutes, its driver's JIT compilers "
            "done with the hot code; the micro-batch figures of that row include the warm-up's)"
            if warm else ""
        )
        + "."
        + (
            " Before the first size the stack served one capture and alert job of "
            f"{STACK_WARM_UP_INCIDENTS - 1} incidents, not measured: a user's Kafka and "
            "ZooKeeper have run for long; capture and the job start cold at every size."
            if result.get("stack_warm_up") else ""
        ),
        table(["partitions", "job", "p50", "p99", "alerts", "micro-batch p50 / max",
               "first alert after start", "capture in sync after start",
               "a job started on the cluster in sync: its first alert after its start"], rows),
        *budget_tables(result),
        table(["partitions", "state store", "checkpoint"], store),
    ]  # fmt: skip
    t = result["throughput"]
    if t:  # a run with --no-throughput has none
        stage_base = stage_rate(t[0]) or 1
        base = t[0]["records_per_s"] or 1
        trows = [
            [x["master"], f"**{fmt(stage_rate(x))}**", f"**{(stage_rate(x) or 0) / stage_base:.2f}x**",
             ", ".join(map(str, sorted(set((x.get("stateful_stage") or {}).get("tasks", []))))),
             ", ".join(fmt(ms) for ms in (x.get("stateful_stage") or {}).get("stage_ms", [])),
             fmt(x["records_per_s"]), f"{(x['records_per_s'] or 0) / base:.2f}x",
             ", ".join(fmt(ms) for ms in x["batch_ms"])]
            for x in t
        ]  # fmt: skip
        parts += [
            f"Throughput on B3's records ({t[0]['records']:,}, 1,000 partitions, 50,000 a "
            "micro-batch), of the stateful stage alone (Spark's event log: the stage of "
            "`transformWithStateInPandas`, from its submission to its completion) and of the "
            "whole micro-batch (Spark's progress: also the stage before it, which reads Kafka, "
            "decodes the Avro and routes each record to its shards, in "
            + (
                "one task per partition of the topic"
                if "read_tasks" not in t[0]
                else "as many tasks as the master has cores, at most one a partition of the topic"
            )
            + "); both over the micro-batches after the first:",
            table(THROUGHPUT_COLUMNS, trows),
            plot_link(result, NAME, "B9: latency against cluster size, throughput by master"),
        ]
    return "\n\n".join(parts)


def budget_tables(result: dict[str, Any]) -> list[str]:
    """Where each latency row's time went (latency_budget.py), and the Spark phases of the
    micro-batches that raised its alerts; nothing for runs that did not trace it."""
    rows, phases = [], []
    for s in result["sizes"]:
        for when, m in (("just started", s), ("warm", s.get("warm"))):
            b = (m or {}).get("budget")
            if not b:
                continue
            size = f"{s['partitions']:,}"
            rows.append([size, when, *(f"{fmt(b[p]['p50'])} / {fmt(b[p]['p99'])}"
                                       for p in (*PARTS, "total")),
                         f"{b['traced']}/{b['incidents']}"])  # fmt: skip
            spent = sorted(b["phases_p50"].items(), key=lambda kv: -(kv[1] or 0))
            phases.append([size, when, ", ".join(f"{k} {fmt(v)}" for k, v in spent)])
    if not rows:
        return []
    return [
        "Where the time went, part by part along one record's path (p50 / p99 ms over the "
        "timed incidents; `bench/latency_budget.py` says how each part is timed). A part's p99 "
        "and the total's come from different incidents, so p99s do not add up:",
        table(["partitions", "job", *(PART_NAMES[p] for p in PARTS), "total", "traced"], rows),
        "Spark's phases of the micro-batches that raised those alerts (p50 ms; `addBatch` "
        "holds the Kafka read, the decode, the stateful stage and the sinks):",
        table(["partitions", "job", "phases"], phases),
    ]


THROUGHPUT_COLUMNS = [
    "master", "stateful stage records/s", "against local[1]", "its tasks (each micro-batch)",
    "its times (ms)",
    "micro-batch records/s", "against local[1]", "micro-batch times (ms)",
]  # fmt: skip


def started_job_targets(sizes: list[dict[str, Any]]) -> list[tuple[str, str, str, bool]]:
    """A job started against the largest cluster in sync alerting within a minute (also
    b9_started_job.py's, which measures that alone)."""
    fresh = [s for s in sizes if s.get("fresh_job_first_alert_s") is not None]
    if not fresh:
        return []
    largest = max(fresh, key=lambda s: s["partitions"])
    took = largest["fresh_job_first_alert_s"]
    return [(f"a job started against {largest['partitions']:,} partitions in sync: its first "
             "alert after its start", f"{took:.0f} s", "≤ 60 s", took <= 60)]  # fmt: skip


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The targets: alert p99 within a second at every size, the biggest cluster's within
    1.5x of the smallest's, warm and just started; a job started against the largest cluster
    alerting within a minute; and a second core worth 1.6x."""
    out = []
    warm = all("warm" in s for s in result["sizes"])
    for when in ("warm", "just started") if warm else ("just started",):
        # size -> (the row of that job, the incidents timed at that size)
        rows = {s["partitions"]: (s["warm"] if when == "warm" else s, s.get("incidents"))
                for s in result["sizes"]}  # fmt: skip
        by_size = {n: row["p99_ms"] for n, (row, _) in rows.items()}
        if not by_size:
            continue
        shown = ", ".join(f"{n:,}: {fmt(p99)} ms" for n, p99 in sorted(by_size.items()))
        # An incident whose alert was not matched has no figure: its row is not met.
        short = {n: (row["alerts_received"], of) for n, (row, of) in rows.items()
                 if row.get("alerts_received", of) != of}  # fmt: skip
        shown += "".join(f" ({n:,}: {got} of {of} alerts matched)"
                         for n, (got, of) in sorted(short.items()))  # fmt: skip
        out.append((f"alert p99 at every size, {when}", shown, "≤ 1,000 ms each",
                    not short and all(p99 is not None and p99 <= 1000
                                      for p99 in by_size.values())))  # fmt: skip
        small, big = by_size[min(by_size)], by_size[max(by_size)]
        if len(by_size) > 1 and small and big:
            out.append((f"alert p99 at {max(by_size):,} partitions against {min(by_size):,}, "
                        f"{when}", f"{big / small:.2f}x" + (" (not every alert matched)"
                                                            if short else ""), "≤ 1.5x",
                        not short and big <= 1.5 * small))  # fmt: skip
    out += started_job_targets(result["sizes"])
    rates = {t["master"]: stage_rate(t) or 0 for t in result["throughput"]}
    if rates.get("local[1]") and "local[2]" in rates:
        ratio = rates["local[2]"] / rates["local[1]"]
        out.append(("stateful stage records/s, local[2] against local[1]", f"{ratio:.2f}x",
                    "≥ 1.6x", ratio >= 1.6))  # fmt: skip
    tasks = [
        n for t in result["throughput"] for n in (t.get("stateful_stage") or {}).get("tasks", [])
    ]
    if tasks:
        out.append(("tasks of the stateful stage a micro-batch (one cluster)", f"{min(tasks)}",
                    "> 1", min(tasks) > 1))  # fmt: skip
    return out


if __name__ == "__main__":
    main()
