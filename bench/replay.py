"""B4: `zkcdc replay` rates: into Kafka at `--speed 0`, and `--alerts-out` through the Spark
alert job, over a log made with `zkcdc simulate` + `zkcdc capture`.

The log: a simulated cluster built with `--partitions` partitions (replication factor 3),
captured (event log only) from its snapshot on, then `simulate run storm` until the log holds
`--records` records. Each replay is timed from the command's start to its exit, as a user
sees it (so `--alerts-out` includes Spark's start); the alert job's own micro-batch rate is
read from its progress lines too.

Run: `.venv/bin/python bench/replay.py [--records 1000000 --partitions 100000]`
(starts the local stack if it is not running, and stops it again then).
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
import uuid
from typing import Any

ZKCDC = [sys.executable, "-m", "zkcdc"]


def records_in(log: Path) -> int:
    from capture.event_log import scan_blocks

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
        if storm is not None and storm.poll() is None:
            storm.send_signal(signal.SIGTERM)
            try:
                storm.wait(60)
            except subprocess.TimeoutExpired:
                storm.kill()
                storm.wait()
        capture.send_signal(signal.SIGTERM)
        capture.wait(120)
    return log


def timed(args: list[str], log_file: Path) -> float:
    started = time.monotonic()
    run = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=log_file.open("wb"))
    if run.returncode != 0:
        raise SystemExit(f"{args[3:5]} failed:\n{log_file.read_text()[-3000:]}")
    return time.monotonic() - started


def main() -> None:
    from zkcdc.stack import StackSettings
    from zkcdc.stack.cluster import running_or_started

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=Path("bench/results/replay.json"))
    args = parser.parse_args()

    stack, info, started_stack = running_or_started(StackSettings())
    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b4-"))
    chroot = f"/zkcdc-bench-b4-{uuid.uuid4().hex[:6]}"
    result: dict[str, Any] = {}
    try:
        log = make_log(info.zookeeper_connect.split("/")[0] + chroot, work, args.records,
                       args.partitions)  # fmt: skip
        total = records_in(log)
        result["log_records"] = total
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
        batches = [json.loads(line) for line in alerts_log.read_text().splitlines()
                   if line.startswith("{") and '"micro-batch"' in line]  # fmt: skip
        busy_ms = sum(b["duration_ms"] for b in batches)
        result["alerts_out"] = {
            "seconds_incl_spark_start": round(alerts_s, 1),
            "records_per_s": round(total / alerts_s),
            "micro_batches": len(batches),
            "records_per_s_in_batches": round(total / (busy_ms / 1000)) if busy_ms else None,
        }
    finally:
        if started_stack:
            stack.down()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
