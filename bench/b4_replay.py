"""B4: `zkcdc replay` rates: into Kafka at `--speed 0`, and `--alerts-out` through the Spark
alert job, over a log made with `zkcdc simulate` + `zkcdc capture`.

The log: a simulated cluster built with `--partitions` partitions (replication factor 3),
captured (event log only) from its snapshot on, then `simulate run storm` until the log holds
`--records` records. Each replay is timed from the command's start to its exit, as a user
sees it (so `--alerts-out` includes Spark's start); the alert job's own micro-batch rate is
read from its progress lines too. Then the floor under any Spark replay here, each in a
process of its own over the same log, start to exit: Spark's part alone (start, Avro decode,
the events as JSON: what the rules are given), and that handed to a stateful pandas function
per cluster that only counts the rows (the hop the Python rules take), with no rule run.

Run: `.venv/bin/python bench/b4_replay.py [--quick] [--records 1000000 --partitions 100000]`
(starts the local stack if it is not running, and stops it again then). `--log DIR` measures
again over a log an earlier run built (its path is printed), without the ~20 minutes of
building one; `--partitions` should then say how many partitions it was built with.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from harness import (
    ZKCDC,
    figure,
    fmt,
    own_stack,
    parser,
    plot_link,
    reproduce,
    save,
    spark_built,
    stop,
    table,
)

NAME = "b4_replay"


def records_in(log: Path) -> int:
    from zkcdc.capture.delivery.event_log import scan_blocks

    return scan_blocks(log).records if log.exists() else 0


def make_log(connect: str, work: Path, records: int, partitions: int) -> Path:
    topics = max(1, partitions // 1000)
    subprocess.run([*ZKCDC, "simulate", "build", "--zookeeper", connect, "--brokers", "6",
                    "--topics", str(topics), "--partitions-per-topic",
                    str(partitions // topics), "--replication-factor", "3"],
                   check=True, capture_output=True)  # fmt: skip
    log = work / "events"
    capture = subprocess.Popen(
        [*ZKCDC, "capture", "--zookeeper", connect, "--cluster", "b4", "--event-log", str(log),
         "--state-dir", str(work / "state"), "--ha-path", f"/zkcdc-bench-ha-{uuid.uuid4().hex[:6]}"],
        stdout=(work / "capture.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    storm = None
    try:
        while records_in(log) < records:
            if storm is None or storm.poll() is not None:
                storm = subprocess.Popen([*ZKCDC, "simulate", "run", "storm", "--zookeeper",
                                          connect, "--rate", "3000", "--duration", "60"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(5)
            print(f"log: {records_in(log)} records", file=sys.stderr, flush=True)
    finally:
        if storm is not None:
            stop(storm)
        stop(capture)
    return log


def timed(args: list[str], log_file: Path) -> float:
    return timed_output(args, log_file)[0]


def timed_output(args: list[str], log_file: Path) -> tuple[float, str]:
    """A command's seconds, start to exit, and what it printed; its log in `log_file`."""
    started = time.monotonic()
    with log_file.open("wb") as log:
        run = subprocess.run(args, stdout=subprocess.PIPE, stderr=log, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{args[3:5]} failed:\n{log_file.read_text()[-3000:]}")
    return time.monotonic() - started, run.stdout


FLOORS = ("decode", "noop_rules")


def spark_floor(mode: str, log: Path) -> None:
    """The log through Spark with none of zkcdc's rules (see the module's docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    from zkcdc.streaming.job.change_source import RECORD_COLUMNS, LogInput, read_changes
    from zkcdc.streaming.job.spark_session import session

    spark = session("local[*]", f"zkcdc-b4-floor-{mode}")
    records, _ = read_changes(spark, LogInput(log))
    records = records.select(*RECORD_COLUMNS)  # what one group's rules are given (alert_job.py)
    if mode == "decode":
        rows = records.select(F.length("events").alias("n"))
    else:

        def count_rows(key: Any, batches: Any, state: Any) -> Any:
            import pandas as pd  # type: ignore[import-untyped]

            yield pd.DataFrame({"n": [sum(len(b["events"].tolist()) for b in batches)]})

        rows = records.groupBy("cluster").applyInPandasWithState(
            count_rows, "n long", "unused long", "append", GroupStateTimeout.NoTimeout
        )
    query = (
        rows.writeStream.foreachBatch(lambda batch, _: batch.agg(F.sum("n")).collect())
        .trigger(availableNow=True)
        .option("checkpointLocation", tempfile.mkdtemp(prefix="zkcdc-b4-floor-"))
        .start()
    )
    query.awaitTermination()
    spark.stop()


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--spark-floor", choices=FLOORS, help=argparse.SUPPRESS)
    p.add_argument(
        "--log",
        type=Path,
        help="measure over this log (an earlier run's "
        "`events` folder, kept in its work folder) instead of building one",
    )
    args = p.parse_args()
    if args.spark_floor:
        spark_floor(args.spark_floor, args.log)
        return
    if args.quick:
        args.records, args.partitions = 60_000, 20_000
    spark_built()  # timed starts are a user's after the first
    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b4-"))
    result: dict[str, Any] = {"partitions": args.partitions}
    # A stack of its own: the simulated tree (ZooKeeper heap for up to ~200k znodes) goes with it.
    with own_stack(brokers=1, zookeeper_heap_mb=1024) as info:
        log = args.log or make_log(info.zookeeper_connect.split("/")[0] + "/sim", work,
                                   args.records, args.partitions)  # fmt: skip
        print(f"log: {log}", file=sys.stderr, flush=True)
        total = records_in(log)
        result["log_records"] = total
        result["log_mb"] = round(sum(f.stat().st_size for f in log.iterdir()) / 2**20, 1)
        topic = f"zkcdc.bench.replayed.{uuid.uuid4().hex[:6]}"
        kafka_s = timed([*ZKCDC, "replay", str(log), "--bootstrap-servers",
                         info.bootstrap_servers, "--topic", topic, "--speed", "0",
                         "--checkpoint", str(work / "replay.json")], work / "replay-kafka.log")  # fmt: skip
        result["into_kafka"] = {
            "seconds": round(kafka_s, 1),
            "records_per_s": round(total / kafka_s),
        }
        alerts_log = work / "replay-alerts.log"
        alerts_s = timed([*ZKCDC, "replay", str(log), "--alerts-out", str(work / "alerts.jsonl")],
                         alerts_log)  # fmt: skip
        # The job's log lines (JSON on stderr): its micro-batches, and the layout it started in.
        lines = [json.loads(line) for line in alerts_log.read_text().splitlines()
                 if line.startswith("{")]  # fmt: skip
        batches = [line for line in lines if line.get("event") == "micro-batch"]
        started = [line for line in lines if line.get("event") == "spark started"]
        busy_ms = sum(b["duration_ms"] for b in batches)
        result["alerts_out"] = {
            "seconds_incl_spark_start": round(alerts_s, 1),
            "records_per_s": round(total / alerts_s),
            "micro_batches": len(batches),
            "records_per_s_in_batches": round(total / (busy_ms / 1000)) if busy_ms else None,
            "layout_shards": started[0].get("shards") if started else None,
        }
        # The same in the sharded layout (two shards on local[2]): with no latency to keep, a
        # bounded replay is a question of throughput, the one layout against the other.
        sharded_s = timed([*ZKCDC, "replay", str(log), "--alerts-out",
                           str(work / "alerts-sharded.jsonl"), "--shards", "2"],
                          work / "replay-alerts-sharded.log")  # fmt: skip
        result["alerts_out_sharded"] = {
            "seconds_incl_spark_start": round(sharded_s, 1),
            "records_per_s": round(total / sharded_s),
        }
        result["floor_s"] = {
            mode: round(timed([sys.executable, __file__, "--spark-floor", mode, "--log",
                               str(log)], work / f"floor-{mode}.log"), 1)
            for mode in FLOORS
        }  # fmt: skip
    plot(result, args.quick)
    print(render(save(NAME, result, args.quick, _without_log(sys.argv))))


def plot(result: dict[str, Any], quick: bool) -> None:
    with figure(NAME, quick, size=(7, 3.5)) as fig:
        ax = fig.subplots()
        labels = ["into Kafka\n(--speed 0)", "--alerts-out\n(incl. Spark start)",
                  "--alerts-out\n(micro-batches)"]  # fmt: skip
        values = [result["into_kafka"]["records_per_s"], result["alerts_out"]["records_per_s"],
                  result["alerts_out"]["records_per_s_in_batches"] or 0]  # fmt: skip
        ax.barh(labels, values)
        ax.axvline(50_000, color="grey", linestyle=":", label="target 50,000/s")
        ax.set(xlabel="records/s", title=f"replay of a {result['log_records']:,}-record log")
        ax.legend(fontsize=8)


def _without_log(argv: list[str]) -> list[str]:
    """The command line as a reader can run it: a log given with `--log` is a temporary folder
    of an earlier run, gone by the time anyone reads the page, and the command without it
    builds the same log again."""
    return [w for i, w in enumerate(argv) if w != "--log" and (i == 0 or argv[i - 1] != "--log")]


def render(result: dict[str, Any]) -> str:
    k, a = result["into_kafka"], result["alerts_out"]
    g = result.get("alerts_out_sharded")
    sharded = [
        ["`replay --alerts-out --shards 2` (the sharded layout), incl. Spark's start",
         f"{fmt(g['records_per_s'])} records/s ({g['seconds_incl_spark_start']} s)", "—"],
    ] if g else []  # fmt: skip
    layout = a.get("layout_shards")
    default = "`replay --alerts-out`" + (
        "" if layout is None else f" (its default layout here: `--shards {layout}`)"
    )
    return "\n\n".join([
        reproduce(result),
        f"The log: `simulate build` of {result['partitions']:,} partitions, `zkcdc capture` from "
        f"its snapshot on, `simulate run storm` until it held {result['log_records']:,} records "
        f"({result['log_mb']} MB). Times are each command's, start to exit.",
        table(["measure", "value", "target"], [
            ["`replay --speed 0` into Kafka", f"**{fmt(k['records_per_s'])} records/s** "
             f"({k['seconds']} s)", "≥ 50,000"],
            [f"{default}, incl. Spark's start", f"**{fmt(a['records_per_s'])} "
             f"records/s** ({a['seconds_incl_spark_start']} s)", "≥ 50,000"],
            ["the same, the alert job's micro-batches alone",
             f"{fmt(a['records_per_s_in_batches'])} records/s ({a['micro_batches']} batches)", "—"],
            *sharded,
            *([["floor: Spark's part alone (start, Avro decode, events as JSON), no rules",
                _floor(result, "decode"), "—"],
               ["floor: the same handed to a no-op Python stateful step per cluster",
                _floor(result, "noop_rules"), "—"]] if "floor_s" in result else []),
        ]),
        plot_link(result, NAME, "B4: replay rates"),
    ])  # fmt: skip


def _floor(result: dict[str, Any], mode: str) -> str:
    seconds = result["floor_s"][mode]
    return f"{seconds} s (at most {fmt(round(result['log_records'] / seconds))} records/s)"


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    k, a = result["into_kafka"]["records_per_s"], result["alerts_out"]["records_per_s"]
    return [
        ("`replay --speed 0` into Kafka", f"{fmt(k)} records/s", "≥ 50,000", k >= 50_000),
        ("`replay --alerts-out`", f"{fmt(a)} records/s", "≥ 50,000", a >= 50_000),
    ]


if __name__ == "__main__":
    main()
