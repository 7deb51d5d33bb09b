"""B10: the lake over a day of a 100,000-partition cluster's history.

The log: B4's (a simulated cluster of `--partitions` partitions captured while `simulate run
storm` changes it, `--log-records` records), laid end to end until it holds `--records`
records, the copies spread over one UTC day: each copy's seqs follow the last copy's and its
times are shifted, so that the lake holds one cluster's contiguous day. (A capture of ten
million changes at the storm's ~3,000 a second would take an hour of the machine for the
same rows.)

Measured, each command timed from its start to its exit as a user runs it (Spark's start
included), and the two questions also warm (a second time in one session: the question
alone):
- ingest: `zkcdc stream history --event-log LOG --available-now --lake L` (the `changes` and
  `znodes` tables), records per second;
- `zkcdc history state --at T`, T in the middle of the day, and `zkcdc history timeline
  TOPIC/P` of one partition over the day;
- each table's data files and bytes per table-day, before and after `zkcdc history compact`;
- the two questions again over the compacted day.

Run: `.venv/bin/python bench/b10_lake.py [--quick] [--records 10000000 --partitions 100000]`
(starts a stack of its own for the log, unless `--log DIR` names one already made).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from b4_replay import timed_output
from harness import ZKCDC, figure, fmt, own_stack, parser, plot_link, reproduce, save, table

NAME = "b10_lake"
MADE = "day.json"  # beside the day's log: what it holds, so that a later run can take it as is
DAY_MS = 86_400_000
TARGETS = {"ingest_records_per_s": 50_000, "state_at_s": 10.0, "timeline_s": 3.0,
           "files_per_table_day": 50}  # fmt: skip


def day_of_copies(log: Path, out: Path, records: int) -> dict[str, Any]:
    """`log`'s records repeated into `out` until it holds `records` (see the module's
    docstring); what was written."""
    from zkcdc.capture.delivery.event_log import EventLogWriter, log_files, read_records

    source = [r for f in log_files(log) for r in read_records(f, lambda damage: None)]
    source.sort(key=lambda r: r["seq"])
    first_ms, last_ms = source[0]["ts_ms"], source[-1]["ts_ms"]
    copies = -(-records // len(source))
    seq_step = source[-1]["seq"] - source[0]["seq"] + 1
    zxid_step = max(r["zxid"] or 0 for r in source) + 1  # a heartbeat's is none
    spacing = max((DAY_MS - 2 * 3_600_000) // copies, last_ms - first_ms + 1)
    start = first_ms - first_ms % DAY_MS + 3_600_000  # the day's first hour
    writer = EventLogWriter(out, source[0]["cluster"], now=time.time, fsync=False)
    written = 0
    for k in range(copies):
        shift = start + k * spacing - first_ms
        batch: list[dict[str, Any]] = []
        for r in source:
            if written + len(batch) >= records:
                break
            batch.append({**r, "seq": r["seq"] + k * seq_step, "zxid": None if r["zxid"] is None else r["zxid"] + k * zxid_step,
                          "ts_ms": r["ts_ms"] + shift, "captured_ms": r["captured_ms"] + shift})  # fmt: skip
            if len(batch) == 20_000:
                writer.append(batch)
                written += len(batch)
                batch = []
        writer.append(batch)
        written += len(batch)
        print(f"log: copy {k + 1}/{copies}, {written:,} records", file=sys.stderr, flush=True)
    writer.close()
    made = {"records": written, "copies": copies, "cluster": source[0]["cluster"],
            "first_ms": start,
            "last_ms": start + (copies - 1) * spacing + last_ms - first_ms}  # fmt: skip
    (out / MADE).write_text(json.dumps(made))
    return made


def files_per_day(spark: Any, lake: str) -> dict[str, dict[str, float]]:
    """Each table's data files and MiB in its largest table-day (the files its current
    version reads)."""
    from pyspark.sql import functions as F

    from zkcdc.streaming.lake.lake_tables import Table, table_uri, table_version

    out = {}
    for t in Table:
        uri = table_uri(lake, t)
        if table_version(spark, uri) is None:
            continue
        frame = spark.read.format("delta").load(uri)
        day = F.col("day") if "day" in frame.columns else F.lit("all")
        files = frame.select(
            day.alias("d"), "_metadata.file_path", "_metadata.file_size"
        ).distinct()
        rows = files.groupBy("d").agg(F.count("*").alias("n"), F.sum("file_size").alias("b"))
        worst = max(rows.collect(), key=lambda r: r["n"])
        out[t.value] = {"files": worst["n"], "mib": round(worst["b"] / 2**20, 1)}
    return out


def warm(lake: str, cluster: str, at_ms: int, subject: str) -> dict[str, float]:
    """The two questions asked twice in one lake session: the second time's seconds."""
    from zkcdc.history.state_at import state_at
    from zkcdc.streaming.job.spark_session import session
    from zkcdc.streaming.lake import history_queries as queries

    spark = session("local[2]", "zkcdc-b10", shuffle_partitions=2, driver_memory="1g", lake=True)
    try:
        out = {}
        for name, ask in (
            ("state_at_s", lambda: state_at(spark, lake, cluster, at_ms)),
            (
                "timeline_s",
                lambda: queries.timeline(spark, lake, queries.Subject.parse((subject,))),
            ),
        ):
            ask()
            started = time.monotonic()
            ask()
            out[name] = round(time.monotonic() - started, 2)
        return out
    finally:
        spark.stop()


def measure(args: Any) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b10-"))
    if args.day_log is not None:  # a day's log made by an earlier run
        made = json.loads((args.day_log / MADE).read_text())
        return measure_on(args, work, args.day_log, made)
    if args.log is None:
        from b4_replay import make_log

        with own_stack(brokers=1, zookeeper_heap_mb=1024) as info:
            args.log = make_log(info.zookeeper_connect.split("/")[0] + "/sim", work,
                                args.log_records, args.partitions)  # fmt: skip
    log = work / "day"
    made = day_of_copies(args.log, log, args.records)
    return measure_on(args, work, log, made)


def measure_on(args: Any, work: Path, log: Path, made: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"partitions": args.partitions, "log": made}
    lake = str(work / "lake")
    ingest_s, _ = timed_output([*ZKCDC, "stream", "history", "--event-log", str(log), "--available-now",
                         "--lake", lake, "--checkpoint", str(work / "checkpoint"),
                         "--driver-memory", args.driver_memory], work / "ingest.log")  # fmt: skip
    result["ingest"] = {"seconds": round(ingest_s, 1),
                        "records_per_s": round(made["records"] / ingest_s)}  # fmt: skip
    at = (made["first_ms"] + made["last_ms"]) // 2
    subject = "sim-0000/0"
    state_s, shown = timed_output([*ZKCDC, "history", "state", "--lake", lake, "--at", str(at), "--json"],
                           work / "state.log")  # fmt: skip
    timeline_s, lines = timed_output([*ZKCDC, "history", "timeline", subject, "--lake", lake, "--json"],
                              work / "timeline.log")  # fmt: skip
    result["cold"] = {"state_at_s": round(state_s, 1), "state_records": len(shown.splitlines()),
                      "timeline_s": round(timeline_s, 1),
                      "timeline_entries": len(lines.splitlines())}  # fmt: skip
    result["warm"] = warm(lake, made["cluster"], at, subject)
    from zkcdc.streaming.job.spark_session import session

    spark = session("local[2]", "zkcdc-b10-files", shuffle_partitions=2, lake=True)
    try:
        result["before_compaction"] = files_per_day(spark, lake)
    finally:
        spark.stop()
    compact_s, _ = timed_output([*ZKCDC, "history", "compact", "--lake", lake, "--retain-hours", "0"],
                         work / "compact.log")  # fmt: skip
    result["compact_s"] = round(compact_s, 1)
    spark = session("local[2]", "zkcdc-b10-files", shuffle_partitions=2, lake=True)
    try:
        result["after_compaction"] = files_per_day(spark, lake)
    finally:
        spark.stop()
    # The questions again over the compacted day: a timeline's files are skipped by the
    # statistics of the Z-ordered files.
    timeline_s, _ = timed_output([*ZKCDC, "history", "timeline", subject, "--lake", lake, "--json"],
                                 work / "timeline-compacted.log")  # fmt: skip
    result["compacted"] = {"timeline_s": round(timeline_s, 1),
                           "warm": warm(lake, made["cluster"], at, subject)}  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return result


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    ingest = result["ingest"]["records_per_s"]
    warm_state, warm_timeline = result["warm"]["state_at_s"], result["warm"]["timeline_s"]
    compacted_timeline = result["compacted"]["warm"]["timeline_s"]
    files = max(t["files"] for t in result["after_compaction"].values())
    timeline_target = f"≤ {TARGETS['timeline_s']:g} s"
    return [
        ("ingest, records/s", fmt(ingest), f"≥ {fmt(TARGETS['ingest_records_per_s'])}",
         ingest >= TARGETS["ingest_records_per_s"]),
        ("`state --at` (warm)", f"{warm_state} s", f"≤ {TARGETS['state_at_s']:g} s",
         warm_state <= TARGETS["state_at_s"]),
        ("`timeline` of a partition, the day compacted (warm)", f"{compacted_timeline} s",
         timeline_target, compacted_timeline <= TARGETS["timeline_s"]),
        ("`timeline` of a partition, the day as ingested (warm)", f"{warm_timeline} s",
         timeline_target, warm_timeline <= TARGETS["timeline_s"]),
        ("data files per table-day after compaction", str(files),
         f"≤ {TARGETS['files_per_table_day']}", files <= TARGETS["files_per_table_day"]),
    ]  # fmt: skip


def plot(result: dict[str, Any], quick: bool) -> None:
    with figure(NAME, quick, size=(7, 3.2)) as fig:
        ax = fig.add_subplot(1, 1, 1)
        tables = list(result["before_compaction"])
        before = [result["before_compaction"][t]["files"] for t in tables]
        after = [result["after_compaction"][t]["files"] for t in tables]
        xs = range(len(tables))
        ax.bar([x - 0.2 for x in xs], before, 0.4, label="before compaction")
        ax.bar([x + 0.2 for x in xs], after, 0.4, label="after")
        ax.axhline(TARGETS["files_per_table_day"], color="k", lw=0.8, ls="--", label="target")
        ax.set_xticks(list(xs), tables)
        ax.set_ylabel("data files in the largest table-day")
        ax.set_yscale("log")
        ax.legend()


def render(result: dict[str, Any]) -> str:
    log = result["log"]
    rows = [[t, fmt(result["before_compaction"][t]["files"]),
             fmt(result["before_compaction"][t]["mib"], " MiB", 1),
             fmt(result["after_compaction"][t]["files"]),
             fmt(result["after_compaction"][t]["mib"], " MiB", 1)]
            for t in result["before_compaction"]]  # fmt: skip
    return "\n\n".join([
        f"{fmt(log['records'])} change records of one cluster of {fmt(result['partitions'])} "
        f"partitions over a day ({log['copies']} copies of B4's log).",
        table(["measure", "start to exit", "warm (the question alone)"], [
            ["ingest (`stream history --event-log --available-now`)",
             f"{result['ingest']['seconds']} s ({fmt(result['ingest']['records_per_s'])} records/s)",
             "—"],
            ["`history state --at` (middle of the day)", f"{result['cold']['state_at_s']} s",
             f"{result['warm']['state_at_s']} s"],
            ["`history timeline` of one partition", f"{result['cold']['timeline_s']} s",
             f"{result['warm']['timeline_s']} s"],
            ["`history compact --retain-hours 0`", f"{result['compact_s']} s", "—"],
            ["`history state --at`, the day compacted", "—",
             f"{result['compacted']['warm']['state_at_s']} s"],
            ["`history timeline` of one partition, the day compacted",
             f"{result['compacted']['timeline_s']} s",
             f"{result['compacted']['warm']['timeline_s']} s"],
        ]),
        table(["table", "files (largest day) before", "MiB", "after compaction", "MiB"], rows),
        plot_link(result, NAME, "B10: data files per table-day before and after compaction"),
        reproduce(result),
    ])  # fmt: skip


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--records", type=int, default=10_000_000)
    p.add_argument("--log-records", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--log", type=Path, help="an event log made before (B4's), used as it is")
    p.add_argument("--day-log", type=Path, help="a day's log an earlier run made (its folder)")
    p.add_argument("--driver-memory", default="4g", help="the ingest's Spark heap")
    args = p.parse_args()
    if args.quick:
        args.records, args.log_records, args.partitions = 200_000, 60_000, 20_000
    result = measure(args)
    plot(result, args.quick)
    print(render(save(NAME, result, args.quick)))
    print(json.dumps(targets(result)))


if __name__ == "__main__":
    main()
