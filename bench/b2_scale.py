"""B2: capture at Kafka's ZooKeeper-era scale: a 200,000-partition tree, then a broker failure
across it.

Starts a stack of its own (other ports, so a running default stack is left alone; ZooKeeper
with a 1.5 GB heap, as a 200,000-partition tree needs more than the default 256 MB; one real
broker, for the changes topic), then:
1. `zkcdc simulate build` of `--brokers` x `--topics` x `--partitions-per-topic` (replication
   factor 3) into `/sim`;
2. `zkcdc capture` publishing to Kafka: time to "in sync" (the snapshot), its RSS there, the
   watches it holds on the server (`wchs`), its CPU while the tree is quiet;
3. `zkcdc simulate run broker-failure`: the controller's tens of thousands of state writes;
   the time from ZooKeeper's last write (its mtime) until the last of them is read back from
   the changes topic.

Run: `.venv/bin/python bench/b2_scale.py [--quick] [--topics 200 --partitions-per-topic 1000]`
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from harness import (
    ZKCDC,
    cpu_seconds,
    fmt,
    plot_link,
    profiled,
    reproduce,
    run_at_scale,
    stop,
    table,
    vm_hwm_mb,
)

from zkcdc.ground import waiting
from zkcdc.ground.unreadable_messages import UnreadableMessages

NAME = "b2_scale"
STATE_PATH = re.compile(r"^/brokers/topics/[^/]+/partitions/\d+/state$")


def zookeeper_rss_mb(state_dir: Path) -> float | None:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(state_dir).encode() in cmdline and b"QuorumPeerMain" in cmdline:
            return vm_hwm_mb(int(proc.name))
    return None


def four_letter(host: str, port: int, word: str) -> str:
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(word.encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


class StateReader:
    """Reads the changes topic from its end: the partition-state records, each with the time it
    was read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.seen: list[tuple[float, dict[str, Any]]] = []
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}",
            "auto.offset.reset": "latest", "enable.auto.commit": False,
            "fetch.wait.max.ms": 10, "fetch.min.bytes": 1,
        })  # fmt: skip
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self.skipped = UnreadableMessages(f"b2 {topic}")
        self._assigned = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from zkcdc.capture.encoding.avro_codec import SingleObjectCodec

        codec = SingleObjectCodec()
        while not self._stop.is_set():
            for message in self._consumer.consume(10_000, 0.1):
                if message.error():
                    continue
                record = self.skipped.read(message, lambda m: codec.decode(m.value()))
                if record is None:
                    continue
                if record["op"] == "UPDATE" and STATE_PATH.match(record["path"]):
                    self.seen.append((time.time(), record))
            if self._consumer.assignment():
                self._assigned.set()

    def wait_assigned(self) -> None:
        self._assigned.wait(60)
        time.sleep(2)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


def main() -> None:
    run_at_scale(NAME, __doc__, measure, render)


def measure(args: Any, info: Any, work: Path) -> dict[str, Any]:
    hosts = info.zookeeper_connect.split("/")[0] + "/sim"
    daemon, reader = None, None
    try:
        started = time.monotonic()
        build = subprocess.run(
            [*ZKCDC, "simulate", "build", "--zookeeper", hosts, "--brokers", str(args.brokers),
             "--topics", str(args.topics), "--partitions-per-topic",
             str(args.partitions_per_topic), "--replication-factor", "3"],
            capture_output=True, text=True,
        )  # fmt: skip
        build_s = time.monotonic() - started
        if build.returncode != 0:
            raise SystemExit(f"build failed:\n{build.stdout}\n{build.stderr}")
        print(f"built in {build_s:.1f} s", flush=True)

        log = work / "capture.log"
        topic = "zkcdc.bench.b2"
        started = time.monotonic()
        daemon = subprocess.Popen(
            [*ZKCDC, "capture", "--zookeeper", hosts, "--cluster", "bench",
             "--state-dir", str(work / "state"), "--event-log", str(work / "events"),
             "--ha-path", "/zkcdc-bench-ha", "--bootstrap-servers", info.bootstrap_servers,
             "--topic", topic],
            stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        # A flame graph of the snapshot's first 30 s (its cost per znode does not change).
        flame = NAME + ("_million" if args.million else "") + "_snapshot"
        with profiled(daemon.pid, flame, args.quick, 30):
            while b'"in sync"' not in log.read_bytes():
                if daemon.poll() is not None:
                    raise SystemExit("capture exited:\n" + log.read_text())
                time.sleep(0.05)
            snapshot_s = time.monotonic() - started
        rss_in_sync = vm_hwm_mb(daemon.pid)
        print(f"in sync after {snapshot_s:.1f} s, RSS {rss_in_sync} MB", flush=True)
        reader = StateReader(info.bootstrap_servers, topic)
        reader.wait_assigned()
        time.sleep(5)  # the snapshot's records drain to Kafka
        zk_host, zk_port = info.zookeeper_connect.split("/")[0].split(":")
        watches = four_letter(zk_host, int(zk_port), "wchs").strip()
        cpu = cpu_seconds(daemon.pid)
        time.sleep(10)
        steady_cpu = (cpu_seconds(daemon.pid) - cpu) / 10

        failure = subprocess.run(
            [*ZKCDC, "simulate", "run", "broker-failure", "--zookeeper", hosts],
            capture_output=True, text=True,
        )  # fmt: skip
        if failure.returncode != 0:
            raise SystemExit(f"broker failure failed:\n{failure.stdout}\n{failure.stderr}")
        written = int(re.search(r"controller rewrote (\d+) partition states", failure.stdout)[1])  # type: ignore[index]
        with contextlib.suppress(waiting.WaitFailed):  # what arrived is counted either way
            waiting.wait_until(
                lambda: sum(1 + r["versions_skipped"] for _, r in reader.seen) >= written,
                300, what="every state write on Kafka",
            )  # fmt: skip
        storm = reader.seen
        last_write_ms = max(r["ts_ms"] for _, r in storm)
        first_write_ms = min(r["ts_ms"] for _, r in storm)
        on_kafka_s = max(t for t, _ in storm)
        accounted = sum(1 + r["versions_skipped"] for _, r in storm)
        return {
            "brokers": args.brokers,
            "topics": args.topics,
            "partitions": args.topics * args.partitions_per_topic,
            "build_s": round(build_s, 1),
            "flame_graph": flame,
            "znodes": json.loads(next(x for x in log.read_text().splitlines() if '"in sync"' in x))[
                "known_znodes"
            ],
            "snapshot_s": round(snapshot_s, 1),
            "capture_rss_mb_in_sync": rss_in_sync,
            "capture_peak_rss_mb": vm_hwm_mb(daemon.pid),
            "zookeeper_peak_rss_mb": zookeeper_rss_mb(info.state_dir),
            "server_watches": watches.splitlines(),
            "steady_cpu_cores": round(steady_cpu, 3),
            "failure_state_writes": written,
            "failure_records_on_kafka": len(storm),
            "failure_versions_accounted": accounted,
            "failure_write_span_s": round((last_write_ms - first_write_ms) / 1000, 1),
            "failure_last_on_kafka_after_last_write_s": round(on_kafka_s - last_write_ms / 1000, 2),
        }
    finally:
        if reader is not None:
            reader.close()
        if daemon is not None:
            stop(daemon)


def render(result: dict[str, Any]) -> str:
    r = result
    return "\n\n".join([
        reproduce(r),
        f"{r['partitions']:,} partitions on {r['brokers']} simulated brokers (replication factor "
        f"3), {r['znodes']:,} znodes; `zkcdc capture` publishing to Kafka.",
        table(["measure", "value", "target"], [
            ["`simulate build` of the tree", f"{r['build_s']} s", "—"],
            ["capture snapshot (start → \"in sync\", a READ record per znode)",
             f"**{r['snapshot_s']} s**", "≤ 60 s"],
            ["capture RSS at \"in sync\" / peak", f"**{fmt(r['capture_rss_mb_in_sync'])} MB** / "
             f"{fmt(r['capture_peak_rss_mb'])} MB", "≤ 1 GB"],
            ["watches held on the server (`wchs`)", "<br>".join(r["server_watches"]), "—"],
            ["capture CPU, tree quiet (heartbeats only)", f"{r['steady_cpu_cores']} cores", "—"],
            ["ZooKeeper peak RSS", f"{fmt(r['zookeeper_peak_rss_mb'])} MB", "—"],
            ["broker failure: state writes by the controller", fmt(r["failure_state_writes"]),
             "—"],
            ["… spread over (first → last write's mtime)", f"{r['failure_write_span_s']} s", "—"],
            ["… records on Kafka / versions accounted",
             f"{fmt(r['failure_records_on_kafka'])} / {fmt(r['failure_versions_accounted'])}", "—"],
            ["… last record read from Kafka, after ZooKeeper's last write",
             f"**{r['failure_last_on_kafka_after_last_write_s']} s**", "≤ 5 s"],
        ]),
        "Flame graph of the snapshot's first 30 s: "
        + plot_link(result, result.get("flame_graph", NAME + "_snapshot"), "", "svg") + ".",
    ])  # fmt: skip


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    r = result
    rss = r["capture_rss_mb_in_sync"] or 0
    late = r["failure_last_on_kafka_after_last_write_s"]
    return [
        (f"snapshot of {r['partitions']:,} partitions", f"{r['snapshot_s']} s", "≤ 60 s",
         r["snapshot_s"] <= 60),
        ("capture RSS at the snapshot", f"{fmt(rss)} MB", "≤ 1 GB", rss <= 1024),
        (f"broker failure ({r['failure_state_writes']:,} state writes) on Kafka after "
         "ZooKeeper's last write", f"{late} s", "≤ 5 s", late <= 5),
    ]  # fmt: skip


if __name__ == "__main__":
    main()
