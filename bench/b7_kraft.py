"""B7: capture from a KRaft metadata log (`--source kraft`): live lag at paced change rates, and
how fast the log parses, beside Kafka's own `kafka-dump-log --cluster-metadata-decoder`.

1. A KRaft stack of its own (three controllers, one broker). `zkcdc capture --source kraft`
   beside the first controller (event log only, the high watermark asked of the controllers).
   Writers change topic configs through the Admin API (each change one ConfigRecord) at each
   rate of `--rates` for `--duration` seconds. Lag: the record's `captured_ms` minus the
   controller's time on the metadata record (`ts_ms`), over the config changes.
2. Parsing: the segment the run left, read into metadata records (record batches, CRC32C,
   every message decoded) `--repeat` times over (best of 5); then into change records (the
   image and its tree, as `--from-metadata-log` does); and the same file printed by Kafka's
   `kafka-dump-log --cluster-metadata-decoder` (its wall time, JVM start included, and again
   without it: its time on an empty segment taken off).

Run: `.venv/bin/python bench/b7_kraft.py [--quick] [--rates 20,50,100]`
"""

from __future__ import annotations

import bisect
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from harness import ZKCDC, fmt, parser, percentile, reproduce, save, stop, table

from zkcdc.capture.delivery.event_log import log_files, read_records
from zkcdc.capture.kraft.history import metadata_history
from zkcdc.capture.kraft.log_follower import MetadataLogFollower
from zkcdc.capture.kraft.metadata_dir import segment_files
from zkcdc.capture.kraft.metadata_records import entries
from zkcdc.capture.kraft.record_batches import Batch, batches, compiled_walk
from zkcdc.ground import waiting
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block

NAME = "b7_kraft"
TOPICS = 20


@contextmanager
def kraft_stack() -> Iterator[LocalStack]:
    state = Path(tempfile.mkdtemp(prefix="zkcdc-bench-kraft-"))
    settings = StackSettings(
        state_dir=state, mode="kraft", brokers=1, kafka_port=free_port_block(1),
        controller_port=free_port_block(3),
        # The leader logs each move of the high watermark: the moment a record is committed.
        log_levels={"org.apache.kafka.raft.LeaderState": "DEBUG"},
    )  # fmt: skip
    stack = LocalStack(settings)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()
        shutil.rmtree(state, ignore_errors=True)


def paced_changes(bootstrap: str, topics: list[str], rate: float, duration_s: float) -> int:
    """Config changes at `rate` a second (one ConfigRecord each), round the topics."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    sent, start, futures = 0, time.monotonic(), []
    while (elapsed := time.monotonic() - start) < duration_s:
        due = int(elapsed * rate) + 1
        while sent < due:
            resource = ConfigResource("topic", topics[sent % len(topics)], incremental_configs=[
                ConfigEntry("retention.ms", str(3_600_000 + sent),
                            incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
            futures += list(admin.incremental_alter_configs([resource]).values())
            sent += 1
        time.sleep(max(0.0, (sent / rate) - (time.monotonic() - start)))
    for future in futures:
        future.result(timeout=60)
    return sent


class FileWatcher(threading.Thread):
    """The floor: a bare follower of the same folder, polling every millisecond, notes when
    each offset could first be read from the file at all (no commit check, no decoding)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.seen_ms: dict[int, float] = {}
        self._done = threading.Event()

    def run(self) -> None:
        follower = MetadataLogFollower(self.directory, 0, lambda d: None)
        while not self._done.is_set():
            now = time.time() * 1000
            for _, batch in follower.poll():
                for offset in range(batch.base_offset, batch.last_offset + 1):
                    self.seen_ms.setdefault(offset, now)
            time.sleep(0.001)
        follower.close()

    def stop(self) -> None:
        self._done.set()
        self.join(10)


_HW_LINE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] .*High watermark set to "
    r"LogOffsetMetadata\(offset=(\d+)"
)


def commit_times(stack: LocalStack) -> tuple[list[int], list[float]]:
    """Each move of the high watermark the quorum's leaders logged (LeaderState at DEBUG), in
    time order: (watermarks, epoch ms). A record at offset o is committed at the first move
    past o. The log's stamp is the controller's clock (this machine's), to the millisecond."""
    moves: list[tuple[float, int]] = []
    for controller in stack.layout.controllers:
        for line in stack.layout.log_file(controller.name).read_text(errors="replace").splitlines():
            if (m := _HW_LINE.match(line)) is not None:
                stamp = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                moves.append((stamp * 1000 + int(m.group(2)), int(m.group(3))))
    moves.sort()
    watermarks, times, top = [], [], -1
    for at, watermark in moves:
        if watermark > top:  # a new leader's first moves can repeat the old ones
            top = watermark
            watermarks.append(watermark)
            times.append(at)
    return watermarks, times


def committed_at(offset: int, commits: tuple[list[int], list[float]]) -> float | None:
    watermarks, times = commits
    i = bisect.bisect_right(watermarks, offset)
    return times[i] if i < len(times) else None


def _stats(values: list[float]) -> dict[str, float | None]:
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99),
            "max": max(values, default=None)}  # fmt: skip


def lag_step(stack: LocalStack, log: Path, cluster: str, since_seq: int, topics: list[str],
             rate: float, duration_s: float, watcher: FileWatcher) -> tuple[dict[str, Any], int]:  # fmt: skip
    info = stack.info()
    started_ms = time.time_ns() // 1_000_000
    sent = paced_changes(info.bootstrap_servers, topics, rate, duration_s)
    time.sleep(2.0)  # the last ones through
    commits = commit_times(stack)
    lags, kafka_part, file_part, committed, zkcdc_part = [], [], [], [], []
    last_seq = since_seq
    for file in log_files(log, cluster):
        for record in read_records(file, lambda d: None):
            if record["seq"] <= since_seq:
                continue
            last_seq = max(last_seq, record["seq"])
            # This step's changes only: not the topics' configs created before the capture.
            if (record["path"].startswith("/config/topics/") and record["op"] != "READ"
                    and record["ts_ms"] >= started_ms):  # fmt: skip
                lags.append(record["captured_ms"] - record["ts_ms"])
                seen = watcher.seen_ms.get(record["zxid"])
                commit = committed_at(record["zxid"], commits)
                if seen is not None and commit is not None:
                    kafka_part.append(seen - record["ts_ms"])
                    file_part.append(record["captured_ms"] - seen)
                    committed.append(commit - record["ts_ms"])
                    # From the moment the record could be given out (in the file beside the
                    # capture, and committed) to its change record.
                    zkcdc_part.append(record["captured_ms"] - max(seen, commit))
    step = {
        "target_per_s": rate,
        "changes": sent,
        "records": len(lags),
        "lag_ms_p50": percentile(lags, 0.5),
        "lag_ms_p99": percentile(lags, 0.99),
        "lag_ms_max": max(lags, default=None),
        "to_file_ms": _stats(kafka_part),
        "to_commit_ms": _stats(committed),
        "file_to_record_ms": _stats(file_part),
        "ready_to_record_ms": _stats(zkcdc_part),
    }
    print(f"rate {rate:g}/s: {step}", flush=True)
    return step, last_seq


def _parse_seconds(data: bytes, repeat: int, compiled: bool) -> tuple[float, int]:
    best = None
    records = 0
    for _ in range(5):  # best of 5: the code's speed, not the VM's hiccups
        started = time.perf_counter()
        records = 0
        for _ in range(repeat):
            for read in batches(data, use_compiled=compiled):
                if isinstance(read, Batch):
                    records += len(entries(read))
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    assert best is not None
    return best, records


def parse_rate(segment: Path, repeat: int) -> dict[str, Any]:
    data = segment.read_bytes()
    if compiled_walk is None:
        raise SystemExit("the compiled batch walk is not built (no C compiler at install?)")
    best, records = _parse_seconds(data, repeat, compiled=True)
    python_only, _ = _parse_seconds(data, repeat, compiled=False)
    started = time.perf_counter()
    changes = sum(1 for _ in metadata_history(segment.parent, "b7", lambda d: None))
    history_s = time.perf_counter() - started
    return {
        "segment_bytes": len(data),
        "records_per_pass": records // repeat,
        "passes": repeat,
        "records": records,
        "seconds": round(best, 3),
        "records_per_s": round(records / best),
        "python_only_records_per_s": round(records / python_only),
        "history_records": changes,
        "history_s": round(history_s, 3),
    }


def dump_log_seconds(stack: LocalStack, segment: Path, work: Path) -> dict[str, Any]:
    """Kafka's own reader on the same file, and on an empty one (its start-up alone)."""
    libs = stack.info().kafka_libs
    empty = work / f"{0:020d}.log"
    empty.write_bytes(b"")

    def run(file: Path) -> float:
        started = time.perf_counter()
        subprocess.run(
            ["java", "-Xmx512m", "-cp", f"{libs}/*", "kafka.tools.DumpLogSegments",
             "--cluster-metadata-decoder", "--files", str(file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=600,
        )  # fmt: skip
        return time.perf_counter() - started

    whole = min(run(segment) for _ in range(2))
    startup = min(run(empty) for _ in range(2))
    return {"seconds": round(whole, 3), "startup_s": round(startup, 3)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--duration", type=float, default=20.0, help="seconds per step")
    p.add_argument("--rates", default="20,50,100", help="config changes/s per step")
    p.add_argument("--repeat", type=int, default=20, help="passes over the segment when parsing")
    args = p.parse_args()
    if args.quick:
        args.duration, args.rates, args.repeat = 4.0, "50", 3
    work = Path(tempfile.mkdtemp(prefix="zkcdc-bench-b7-"))
    with kraft_stack() as stack:
        info = stack.info()
        admin = AdminClient({"bootstrap.servers": info.bootstrap_servers})
        topics = [f"b7-{i}-{uuid.uuid4().hex[:4]}" for i in range(TOPICS)]
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        create_topics(lambda: admin, [NewTopic(t, 10, 1) for t in topics], 60)
        directory = info.metadata_log_dirs[0]
        log = work / "events"
        capture = subprocess.Popen(
            [*ZKCDC, "capture", "--source", "kraft", "--metadata-log-dir", str(directory),
             "--bootstrap-controllers", info.bootstrap_controllers, "--cluster", "b7",
             "--event-log", str(log), "--state-dir", str(work / "state")],
            stdout=(work / "capture.log").open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        watcher = FileWatcher(directory)
        watcher.start()
        try:
            try:
                waiting.wait_until(
                    lambda: "in sync" in (work / "capture.log").read_text(errors="replace"), 60,
                    what="capture in sync", interval_s=0.2,
                    abandon=lambda: None if capture.poll() is None else "capture exited",
                )  # fmt: skip
            except waiting.WaitFailed as exc:
                raise SystemExit(f"{exc}\n" + (work / "capture.log").read_text()) from None
            steps, seq = [], 0
            for rate in (float(r) for r in args.rates.split(",")):
                step, seq = lag_step(stack, log, "b7", seq, topics, rate, args.duration, watcher)
                steps.append(step)
        finally:
            stop(capture)
            watcher.stop()
        threading.Event().wait(1.0)
        (_, segment), *_ = segment_files(directory)
        copy = work / "copy" / "__cluster_metadata-0"
        copy.mkdir(parents=True)
        shutil.copy(segment, copy / segment.name)
        parsing = parse_rate(copy / segment.name, args.repeat)
        dump = dump_log_seconds(stack, copy / segment.name, work)
    shutil.rmtree(work, ignore_errors=True)
    save(NAME, {"step_s": args.duration, "topics": TOPICS, "steps": steps, "parsing": parsing,
                "dump_log": dump}, args.quick)  # fmt: skip


LAG_COLUMNS = ["changes/s", "changes", "records", "lag p50 ms", "p99", "in the file p50", "p99",
               "committed p50", "p99", "file → record p50", "p99", "zkcdc's part p50", "p99",
               "max"]  # fmt: skip


def render(result: dict[str, Any]) -> str:
    rows = []
    for s in result["steps"]:
        ready = s.get("ready_to_record_ms")
        rows.append(
            [fmt(s["target_per_s"]), fmt(s["changes"]), fmt(s["records"]), fmt(s["lag_ms_p50"]),
             fmt(s["lag_ms_p99"]), fmt(s["to_file_ms"]["p50"]), fmt(s["to_file_ms"]["p99"]),
             fmt(s.get("to_commit_ms", {}).get("p50")), fmt(s.get("to_commit_ms", {}).get("p99")),
             fmt(s["file_to_record_ms"]["p50"]), fmt(s["file_to_record_ms"]["p99"]),
             fmt(ready and ready["p50"]), f"**{fmt(ready and ready['p99'])}**",
             fmt(ready and ready["max"])]
        )  # fmt: skip
    parsing, dump = result["parsing"], result["dump_log"]
    return "\n\n".join(
        [
            reproduce(result),
            f"A KRaft stack of three controllers and one broker; `zkcdc capture --source kraft` beside "
            f"the first controller (event log only). Topic config changes through the Admin API at "
            f"each rate for {result['step_s']:g} s, round {result['topics']} topics. Times from the "
            "controller's time on the metadata record (`ts_ms`): **in the file**, when a bare "
            "follower of the folder polling every millisecond could first read it (Kafka's append "
            "linger, 25 ms by default, and the replication to this controller); **committed**, "
            "when the quorum's leader moved its high watermark past it (its own DEBUG log line, "
            "to the ms); **lag**, the record's `captured_ms`. zkcdc may give a record out only "
            "once it is both in the file and committed: **zkcdc's part** runs from that moment "
            "to the change record (the high watermark asked, the record made, the event log "
            "written); *file → record* includes the wait for the commit.",
            table(LAG_COLUMNS, rows),
            f"Parsing the segment the run left ({fmt(parsing['segment_bytes'])} bytes, "
            f"{fmt(parsing['records_per_pass'])} records, read {parsing['passes']} times over): "
            f"**{fmt(parsing['records_per_s'])} records/s** (batches, CRC32C, every message decoded; "
            f"best of 5; the batch walk compiled, `capture/kraft/_batch_walk.c`"
            + (
                f"; in Python alone, as where zkcdc was installed without a C compiler: "
                f"{fmt(parsing['python_only_records_per_s'])} records/s"
                if "python_only_records_per_s" in parsing
                else ""
            )
            + "). As change records (the image and its tree, `--from-metadata-log`): "
            f"{fmt(parsing['history_records'])} records in {parsing['history_s']:g} s. "
            f"`kafka-dump-log --cluster-metadata-decoder` on the same file: {dump['seconds']:g} s, "
            f"of which {dump['startup_s']:g} s is its start on an empty file.",
        ]
    )


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    rate = result["parsing"]["records_per_s"]
    p99 = max(s["ready_to_record_ms"]["p99"] or 0 for s in result["steps"])
    total = max(s["lag_ms_p99"] or 0 for s in result["steps"])
    top = max(s["target_per_s"] for s in result["steps"])
    return [
        ("metadata log parsed", f"{rate:,} records/s", "≥ 200,000 records/s", rate >= 200_000),
        (f"KRaft capture lag p99 (in the file and committed -> record), paced up to {top:g} "
         "changes/s", f"{p99:.1f} ms", "≤ 20 ms", p99 <= 20),
        (f"KRaft capture lag p99 (controller's record time -> record; Kafka's 25 ms append "
         f"linger and the quorum's commit inside), paced up to {top:g} changes/s",
         f"{total:g} ms", "≤ 20 ms", total <= 20),
    ]  # fmt: skip


if __name__ == "__main__":
    main()
