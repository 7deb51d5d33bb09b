"""B9, a broker failure at 1,000,000 partitions (what it
measures: the alert job's state size, checkpoint size and the alerts of that failure): a
simulated cluster of 10 brokers (replication factor 3), `zkcdc capture` and `zkcdc stream
alerts` as users run them; once the job has read capture's snapshot, one broker
fails and the controller rewrites the state of every partition it held. Timed: the
controller's writes, and each alert of the failure on the alerts topic, from the failure's
start; counted: the `under_replicated` alerts against the partitions that lost the broker.

Run: `.venv/bin/python bench/b9_broker_failure.py [--quick]` (a stack of its own: one broker,
ZooKeeper with a 6 GB heap; removed at the end; ~20 min, most of it capture's snapshot of
2,000,000 znodes and the job reading it; `--quick`: 10,000 partitions).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from b3_alert_job import batch_stats, micro_batches
from harness import (
    ZKCDC,
    directory_mb,
    fmt,
    own_stack,
    parser,
    reproduce,
    save,
    table,
    vm_hwm_mb,
    wait_for,
)

from zkcdc.view.alerts_tail import alert_of

NAME = "b9_broker_failure"
VICTIM = 1
CANARY = "/brokers/topics/sim-0000/partitions/0/state"
OFFLINE = b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":9,"isr":[2]}'


class AlertsListener:
    """Every alert on the topic from its start, each with when it was read."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.alerts: list[tuple[dict[str, Any], float]] = []
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False,
                                   "group.id": f"bench-{uuid.uuid4().hex[:6]}"})  # fmt: skip
        self._topic, self._stop = topic, threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        while not self._stop.is_set():
            topics = self._consumer.list_topics(self._topic, timeout=5).topics
            parts = list(topics[self._topic].partitions) if self._topic in topics else []
            if parts:
                break
            time.sleep(0.5)
        self._consumer.assign([TopicPartition(self._topic, p, 0) for p in parts])
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, 0.2):
                if message.error() is None:
                    read = time.time()
                    with self._lock:
                        self.alerts.append((alert_of(message), read))

    def firing(self, rule: str, after: float = 0.0) -> dict[str, float]:
        """entity -> when its first FIRING of `rule` was read, of those read after `after`."""
        if not self._thread.is_alive() and not self._stop.is_set():
            raise SystemExit("the alerts topic's reader ended (its traceback above)")
        with self._lock:
            out: dict[str, float] = {}
            for alert, read in self.alerts:
                if alert["rule"] == rule and alert["status"] == "FIRING" and read >= after:
                    out.setdefault(alert["entity"], read)
            return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


def lost_partitions(zk: Any, victim: int) -> int:
    """The partitions whose replicas include the victim, by the topics' assignments."""
    count = 0
    for topic in zk.get_children("/brokers/topics"):
        assignment = json.loads(zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
        count += sum(victim in replicas for replicas in assignment.values())
    return count


def peak_rss_mb(pid: int) -> float:
    """A process's and its children's peak resident memory, added (the job: Python and JVM)."""
    total = 0.0
    for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        try:
            total += vm_hwm_mb(p.pid) or 0  # a zombie Python worker has no VmHWM
        except FileNotFoundError:  # a Python worker ended meanwhile
            continue
    return round(total)


def measure(args: Any, info: Any, work: Path) -> dict[str, Any]:
    from kazoo.client import KazooClient

    hosts = info.zookeeper_connect.split("/")[0] + "/sim"
    changes, alerts_topic = (f"zkcdc.bench.b9f.{kind}.{uuid.uuid4().hex[:6]}"
                             for kind in ("changes", "alerts"))  # fmt: skip
    partitions = args.topics * args.partitions_per_topic
    processes: list[subprocess.Popen[Any]] = []

    def start(name: str, *argv: str) -> subprocess.Popen[Any]:
        log = (work / f"{name}.log").open("wb")
        processes.append(subprocess.Popen([*ZKCDC, *argv], stdout=log, stderr=subprocess.STDOUT))
        return processes[-1]

    def logged(name: str, text: bytes) -> bool:
        return text in (work / f"{name}.log").read_bytes()

    began = time.monotonic()
    subprocess.run([*ZKCDC, "simulate", "build", "--zookeeper", hosts, "--brokers",
                    str(args.brokers), "--topics", str(args.topics), "--partitions-per-topic",
                    str(args.partitions_per_topic), "--replication-factor", "3"],
                   check=True, capture_output=True)  # fmt: skip
    build_s = time.monotonic() - began
    zk = KazooClient(hosts=hosts)
    zk.start()
    listener = AlertsListener(info.bootstrap_servers, alerts_topic)  # waits for the topic
    try:
        lost = lost_partitions(zk, VICTIM)
        began = time.monotonic()
        capture = start("capture", "capture", "--zookeeper", hosts, "--cluster", "b9f",
                        "--bootstrap-servers", info.bootstrap_servers, "--topic", changes,
                        "--state-dir", str(work / "capture"), "--ha-path", "/zkcdc-bench-b9f-ha")  # fmt: skip
        job = start("alerts", "stream", "alerts", "--bootstrap-servers", info.bootstrap_servers,
                    "--topic", changes, "--alerts-topic", alerts_topic,
                    "--checkpoint", str(work / "checkpoint"), *args.job_arg)  # fmt: skip
        wait_for("capture in sync", lambda: logged("capture", b'"in sync"'), 3600, capture)
        snapshot_s = time.monotonic() - began
        print(f"capture in sync after {snapshot_s:.0f} s", file=sys.stderr, flush=True)
        # The job has read the snapshot once a partition taken offline after it gives an alert.
        was = zk.get(CANARY)[0]
        zk.set(CANARY, OFFLINE)
        wait_for("the job through the snapshot",
             lambda: "sim-0000/0" in listener.firing("offline_partition"), 3600, job)  # fmt: skip
        zk.set(CANARY, was)
        job_read_s = time.monotonic() - began
        print(f"the job read the snapshot after {job_read_s:.0f} s", file=sys.stderr, flush=True)
        batches_before = len(micro_batches(work))
        time.sleep(15)  # the canary's RESOLVED and the job idle again

        gone: list[float] = []  # when the victim's registration went, as ZooKeeper told us

        def registration(_: Any, __: Any, event: Any = None) -> None:
            if event is not None and event.type == "DELETED":
                gone.append(time.time())

        zk.DataWatch(f"/brokers/ids/{VICTIM}", registration)  # brought up by the run, then gone
        failed_at = time.time()
        failure = start("failure", "simulate", "run", "broker-failure", "--zookeeper", hosts,
                        "--broker", str(VICTIM), "--hold", "3600")  # fmt: skip
        wait_for("the failure staged", lambda: logged("failure", b"holding"), 1800, failure)
        writes_s = time.time() - failed_at
        print(f"the controller's writes done after {writes_s:.0f} s", file=sys.stderr, flush=True)

        def all_alerts() -> bool:
            return len(listener.firing("under_replicated", failed_at)) >= lost

        try:
            wait_for("every partition's under_replicated alert", all_alerts, args.timeout_s, job)
            complete = True
        except SystemExit as exc:  # the figures so far say how far it got
            print(exc, file=sys.stderr)
            complete = False
        under = sorted(listener.firing("under_replicated", failed_at).values())
        down = listener.firing("broker_down", failed_at).get(f"broker/{VICTIM}")
        by_rule: dict[str, int] = {}
        for alert, read in list(listener.alerts):
            if read >= failed_at and alert["status"] == "FIRING":
                by_rule[alert["rule"]] = by_rule.get(alert["rule"], 0) + 1
        batches = micro_batches(work)[batches_before:]
        return {
            "brokers": args.brokers,
            "partitions": partitions,
            "lost_partitions": lost,
            "job_args": args.job_arg,
            "build_s": round(build_s, 1),
            "capture_in_sync_s": round(snapshot_s, 1),
            "job_through_snapshot_s": round(job_read_s, 1),
            "controller_writes_s": round(writes_s, 1),
            # The run first brings the brokers up (and reads the tree); the failure is this.
            "broker_gone_s": round(gone[0] - failed_at, 1) if gone else None,
            "complete": complete,
            "under_replicated_alerts": len(under),
            "first_under_replicated_s": round(under[0] - failed_at, 1) if under else None,
            "last_under_replicated_s": round(under[-1] - failed_at, 1) if under else None,
            "broker_down_s": round(down - failed_at, 1) if down else None,
            "firing_by_rule": dict(sorted(by_rule.items())),
            "storm_micro_batches": len(batches),
            **batch_stats(batches),
            "job_peak_rss_mb": peak_rss_mb(job.pid),
            "capture_peak_rss_mb": peak_rss_mb(capture.pid),
            "checkpoint_mb": round(directory_mb(work / "checkpoint"), 1),
            "state_mb": round(directory_mb(work / "checkpoint" / "alerts" / "state"), 1),
        }
    finally:
        listener.close()
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(300)
        zk.stop()


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--partitions-per-topic", type=int, default=1000)
    p.add_argument("--brokers", type=int, default=10)
    p.add_argument("--zookeeper-heap-mb", type=int, default=6144)
    p.add_argument("--timeout-s", type=float, default=3600, help="for the failure's alerts")
    p.add_argument("--job-arg", action="append", default=None, help="one more flag for the job")
    args = p.parse_args()
    if args.quick:
        args.topics = 10
    args.job_arg = args.job_arg or ["--driver-memory", "3g"]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with own_stack(brokers=1, zookeeper_heap_mb=args.zookeeper_heap_mb) as info:
        result = measure(args, info, Path(tempfile.mkdtemp(prefix="zkcdc-bench-b9f-")))
    print(render(save(NAME, result, args.quick)))


def since(later: float | None, earlier: float | None) -> str:
    return "—" if later is None or earlier is None else f"{later - earlier:,.1f} s"


def render(r: dict[str, Any]) -> str:
    rows = [
        ["`simulate build` of the tree", f"{fmt(r['build_s'], digits=1)} s"],
        ["capture's snapshot (start → \"in sync\")", f"{fmt(r['capture_in_sync_s'], digits=1)} s"],
        ["the alert job through the snapshot (start → an alert after it)",
         f"{fmt(r['job_through_snapshot_s'], digits=1)} s"],
        [f"broker {VICTIM} fails: partitions that held it", f"{r['lost_partitions']:,}"],
        ["… its registration gone, after the failure's start (`simulate run`, which brings the "
         "10 brokers up first)", f"{fmt(r.get('broker_gone_s'), digits=1)} s"],
        ["… the controller's state writes done, after the failure's start",
         f"{fmt(r['controller_writes_s'], digits=1)} s"],
        ["… `broker_down` on the alerts topic, after it", f"{fmt(r['broker_down_s'], digits=1)} s"],
        ["… `under_replicated` alerts on the alerts topic / partitions that lost the broker",
         f"**{r['under_replicated_alerts']:,} / {r['lost_partitions']:,}**"],
        ["… the first and the last of them, after the failure's start",
         f"{fmt(r['first_under_replicated_s'], digits=1)} s / "
         f"**{fmt(r['last_under_replicated_s'], digits=1)} s**"],
        ["… the last of them after the controller's last write / after the registration went",
         f"**{since(r['last_under_replicated_s'], r['controller_writes_s'])}** / "
         f"{since(r['last_under_replicated_s'], r.get('broker_gone_s'))}"],
        ["… every FIRING after the failure, by rule",
         ", ".join(f"{k} {v:,}" for k, v in r["firing_by_rule"].items())],
        ["… the job's micro-batches through it: count, p50 / max",
         f"{r['storm_micro_batches']}, {fmt(r['micro_batch_ms_p50'])} / "
         f"{fmt(r['micro_batch_ms_max'])} ms"],
        ["the job's state store / checkpoint after it",
         f"{r['state_mb']} MB / {r['checkpoint_mb']} MB"],
        ["peak RSS: the job (Python and Spark's JVM) / capture",
         f"{r['job_peak_rss_mb']:,} MB / {r['capture_peak_rss_mb']:,} MB"],
    ]  # fmt: skip
    return "\n\n".join([
        reproduce(r),
        f"{r['partitions']:,} partitions on {r['brokers']} simulated brokers (replication factor "
        f"3); the alert job with `{' '.join(r['job_args'])}` and its default rules "
        "(`under_replicated` after 10 s of event time)"
        + ("" if r["complete"] else "; **the run ended before every alert came**") + ".",
        table(["measure", "value"], rows),
    ])  # fmt: skip


if __name__ == "__main__":
    main()
