"""B6: the chaos soak. Capture (an active and a standby daemon), the alert job and Alertmanager
under a steady write storm on the local stack with a 3-node ZooKeeper ensemble, while faults are
injected on a schedule: the active capture killed (-9), the ZooKeeper leader killed, the active
capture frozen past its session timeout with records in flight (it must step down by itself),
the whole ZooKeeper ensemble frozen past every session (twice: both daemons must ride it out),
each broker killed and restarted, all brokers down for a minute, the alert job's driver killed
and restarted on its checkpoint, the active capture's event-log disk (a tmpfs) filled, then
freed.

Measured on the changes topic (what consumers get): writes made, versions seen, reported
skipped and unaccounted (goal 0), duplicate records by path + version (goal 0), duplicate seqs
and seq gaps (goal 0), capture daemons and the alert job exiting by themselves (goal 0; the
job's driver killed must end the job in one line); each expected alert (broker_down of every
broker episode) FIRING and RESOLVED exactly once on
the alerts topic, and active in Alertmanager while it held, resolved at the end; capture RSS
over time (flat); recovery time after each fault (from the fault to the first record on Kafka
of a write made after it).

Run: `.venv/bin/python bench/b6_soak.py [--quick] [--minutes M]` (root: it mounts tmpfs).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import psutil
from harness import ZKCDC, figure, fmt, parser, plot_link, reproduce, save, stop, table

from zkcdc.ground import waiting
from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.stack.probes import free_port

NAME = "b6_soak"
CLUSTER = "soak"
STORM_PATHS = [f"/consumers/soak/offsets/t{t}/{p}" for t in range(4) for p in range(5)]


# -- the stack and the processes -------------------------------------------------------------
@contextlib.contextmanager
def ensemble_stack() -> Iterator[tuple[Any, Any]]:
    from zkcdc.stack import LocalStack, StackSettings
    from zkcdc.stack.probes import free_port_block

    state = Path(tempfile.mkdtemp(prefix="zkcdc-b6-stack-"))
    settings = StackSettings(state_dir=state, brokers=3, zookeeper_nodes=3,
                             zookeeper_port=free_port_block(9), kafka_port=free_port_block(3))  # fmt: skip
    stack = LocalStack(settings)
    try:
        yield stack, stack.up()
    finally:
        stack.down()
        shutil.rmtree(state, ignore_errors=True)


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


class Capture:
    """One of the two capture daemons, restartable; its event log on a tmpfs of its own."""

    def __init__(self, index: int, info: Any, work: Path, disk: Path, topic: str) -> None:
        self.index, self.disk = index, disk
        self.port = free_port()
        self.args = [
            *ZKCDC, "capture", "--zookeeper", info.zookeeper_hosts + info.chroot,
            "--bootstrap-servers", info.bootstrap_servers, "--topic", topic, "--cluster", CLUSTER,
            "--event-log", str(disk / "events"), "--state-dir", str(work / f"state-{index}"),
            "--ha-path", "/zkcdc-soak/ha", "--session-timeout-s", "4",
            "--metrics-port", str(self.port),
        ]  # fmt: skip
        self.log = work / f"capture-{index}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exits = 0  # on its own (not killed by a fault)

    def start(self) -> None:
        self.starts += 1
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def role(self) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/livez", timeout=2) as r:
                return str(r.read().decode().strip())
        except OSError:
            return None

    def rss_mb(self) -> float | None:
        if not self.alive:
            return None
        assert self.process is not None
        with contextlib.suppress(psutil.Error):
            return float(psutil.Process(self.process.pid).memory_info().rss) / 2**20
        return None


def active(captures: list[Capture], timeout_s: float = 60) -> Capture:
    def found() -> Capture | None:
        return next((c for c in captures if c.alive and c.role() == "active"), None)

    try:
        return waiting.wait_until(found, timeout_s, what="an active capture daemon", interval_s=0.5)
    except waiting.WaitFailed as exc:
        raise RuntimeError(str(exc)) from None


class AlertJob:
    def __init__(self, info: Any, work: Path, changes: str, alerts: str, am: str) -> None:
        self.args = [
            *ZKCDC, "stream", "alerts", "--bootstrap-servers", info.bootstrap_servers,
            "--topic", changes, "--alerts-topic", alerts, "--no-state",
            "--checkpoint", str(work / "alerts-checkpoint"), "--alertmanager", am,
            "--alertmanager-resend-s", "5",
            # A second sink: the job's alerts as it made them, beside what the topic holds.
            "--alerts-out", str(work / "alerts.jsonl"),
        ]  # fmt: skip
        self.log = work / "alert-job.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)


# -- load and observation --------------------------------------------------------------------
class Storm(threading.Thread):
    """Steady writes at `rate`/s on legacy-consumer offsets under Kafka's chroot (Kafka ignores
    them; capture records each), through every fault (kazoo retries its connection)."""

    def __init__(self, hosts: str, rate: float) -> None:
        super().__init__(daemon=True)
        from kazoo.client import KazooClient

        self.client = KazooClient(hosts=hosts, timeout=10.0, logger=_quiet())
        self.client.start(30)
        for path in STORM_PATHS:
            self.client.ensure_path(path)
        self.rate, self.writes, self.failed = rate, 0, 0
        self.per_second: Counter[int] = Counter()
        self.halt = threading.Event()

    def run(self) -> None:
        n, started = 0, time.monotonic()
        while not self.halt.is_set():
            n += 1
            try:
                self.client.set(STORM_PATHS[n % len(STORM_PATHS)], str(n).encode())
                self.writes += 1
                self.per_second[int(time.time())] += 1
            except (
                Exception
            ):  # connection loss during a ZooKeeper fault: the write may or may not be in
                self.failed += 1
                time.sleep(0.1)
            delay = started + n / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def final_versions(self) -> dict[str, int]:
        self.halt.set()
        self.join(30)
        versions = {}
        for path in STORM_PATHS:
            stat = self.client.exists(path)
            versions[path] = stat.version
        self.client.stop()
        self.client.close()
        return versions


class TopicWatcher(threading.Thread):
    """Reads a topic from the beginning as it fills; `keep(message)` makes what is kept."""

    def __init__(self, bootstrap: str, topic: str, keep: Callable[[Any], Any]) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.topic, self.keep = topic, keep
        self.skipped = UnreadableMessages(f"b6 {topic}")
        self.items: list[Any] = []
        self.halt = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"b6-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000,
            "logger": _quiet(), "isolation.level": "read_committed",
        })  # fmt: skip

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        assigned = False
        while not self.halt.is_set():
            if not assigned:
                try:
                    meta = self._consumer.list_topics(self.topic, timeout=5)
                    parts = meta.topics[self.topic].partitions
                except Exception:
                    parts = {}
                if not parts:
                    time.sleep(1)
                    continue
                self._consumer.assign(
                    [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in parts]
                )
                assigned = True
            for message in self._consumer.consume(1000, 0.5):
                if not message.error():
                    item = self.skipped.read(message, self.keep)
                    if item is not None:
                        self.items.append(item)
        self._consumer.close()


def _quiet() -> Any:
    from zkcdc.ground import logs

    return logs.quiet("b6.clients")


def change_of(schema: Any) -> Callable[[Any], dict[str, Any]]:
    def keep(message: Any) -> dict[str, Any]:
        r: Any = fastavro.schemaless_reader(io.BytesIO(message.value()[10:]), schema, schema)

        def stat(z: dict[str, Any] | None) -> tuple[int, int, int] | None:
            return None if z is None else (z["czxid"], z["version"], z["mzxid"])

        return {"seq": r["seq"], "op": r["op"], "path": r["path"], "before": stat(r["before"]),
                "after": stat(r["after"]), "skipped": r["versions_skipped"], "ts_ms": r["ts_ms"],
                "arrived": time.time()}  # fmt: skip

    return keep


ALERT_FIELDS = ("alert_id", "status", "rule", "entity", "started_ms")  # what the soak keeps


def alert_of(message: Any) -> dict[str, Any]:
    alert = json.loads(message.value())
    return {k: alert[k] for k in ALERT_FIELDS}


class Sampler(threading.Thread):
    """Every 2 s: each capture's RSS, and Alertmanager's active alert ids."""

    def __init__(self, captures: list[Capture], am_url: str) -> None:
        super().__init__(daemon=True)
        self.captures, self.am_url = captures, am_url
        self.rss: list[tuple[float, int, int, float]] = []  # (t, capture, start no, MB)
        self.am_active: dict[str, float] = {}  # alert_id -> first seen active
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(2.0):
            now = time.time()
            for c in self.captures:
                mb = c.rss_mb()
                if mb is not None:
                    self.rss.append((now, c.index, c.starts, mb))
            for alert_id in am_active(self.am_url):
                self.am_active.setdefault(alert_id, now)


def am_active(url: str) -> set[str]:
    try:
        with urllib.request.urlopen(url + "/api/v2/alerts?active=true", timeout=3) as r:
            alerts = json.loads(r.read())
    except OSError:
        return set()
    return {a["labels"].get("alert_id", "") for a in alerts if a["status"]["state"] == "active"}


# -- faults ----------------------------------------------------------------------------------
class Faults:
    def __init__(self, stack: Any, captures: list[Capture], job: AlertJob, hold_s: float) -> None:
        self.stack, self.captures, self.job, self.hold_s = stack, captures, job, hold_s
        self.done: list[dict[str, Any]] = []

    def _record(self, name: str, start: float, **extra: Any) -> None:
        # A daemon that exited by itself during the fault (one a fault kills is started again
        # by it before this) is counted against it, and started again.
        extra.setdefault("exits", self._exits())
        extra.setdefault("job_exits", self._job_exits())
        self.done.append({"fault": name, "start": start, "restored": time.time(), **extra})
        print(f"b6: {name} done", flush=True)

    def kill_active_capture(self) -> None:
        victim, start = active(self.captures), time.time()
        assert victim.process is not None
        victim.process.kill()
        victim.process.wait()
        time.sleep(10)
        victim.start()
        self._record("active capture kill -9", start)

    def kill_zookeeper_leader(self) -> None:
        from zkcdc.stack.probes import zookeeper_mode

        nodes = self.stack.layout.zookeepers
        leader = next(f"zookeeper-{n.node_id}" for n in nodes
                      if zookeeper_mode("127.0.0.1", n.client_port) == "leader")  # fmt: skip
        start = time.time()
        self.stack.stop_zookeeper(leader, signal.SIGKILL)
        time.sleep(10)
        self.stack.start_zookeeper(leader)
        self._record("ZooKeeper leader kill -9", start, node=leader)

    def freeze_active_capture(self) -> None:
        """The active frozen with records in flight (the storm never stops) past its session:
        the standby takes over and fences it; woken, it must step down and campaign again,
        giving out nothing more and never exiting."""
        victim, start = active(self.captures), time.time()
        assert victim.process is not None
        victim.process.send_signal(signal.SIGSTOP)
        time.sleep(12)  # three session timeouts
        victim.process.send_signal(signal.SIGCONT)
        self._roles_settle()
        self._record("active capture frozen past its session", start)

    def freeze_zookeeper(self) -> None:
        """Every ZooKeeper server frozen (SIGSTOP) past every session, then back: each daemon
        rides it out by itself (one active afterwards), none exits."""
        records = self.stack.records()
        frozen = [records[f"zookeeper-{n.node_id}"].pid for n in self.stack.layout.zookeepers]
        start = time.time()
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(12)  # three session timeouts
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        self._roles_settle()
        self._record("ZooKeeper ensemble frozen past every session", start)

    def _roles_settle(self, timeout_s: float = 120) -> None:
        """Until one daemon is active and the other standby, or one exited (counted then)."""
        try:
            waiting.wait_until(
                lambda: not all(c.alive for c in self.captures)
                or sorted(str(c.role()) for c in self.captures) == ["active", "standby"],
                timeout_s, what="an active/standby pair", interval_s=0.5,
                detail=lambda: str([c.role() for c in self.captures]),
            )  # fmt: skip
        except waiting.WaitFailed as exc:
            raise RuntimeError(str(exc)) from None

    def _exits(self) -> int:
        """Daemons that exited (each restarted: the soak goes on, the count is the finding)."""
        gone = [c for c in self.captures if not c.alive]
        for c in gone:
            c.exits += 1
            c.start()
        return len(gone)

    def _job_exits(self) -> int:
        """The alert job exited by itself (as a supervisor would, it is started again)."""
        assert self.job.process is not None
        if self.job.process.poll() is None:
            return 0
        self.job.start()
        return 1

    def kill_broker(self, broker: int) -> None:
        start = time.time()
        self.stack.stop_broker(broker, signal.SIGKILL)
        time.sleep(20)
        self.stack.start_broker(broker)
        self._record(f"broker {broker} kill -9", start, brokers=[broker])

    def all_brokers_down(self) -> None:
        start = time.time()
        for b in (1, 2, 3):
            self.stack.stop_broker(b, signal.SIGKILL)
        time.sleep(self.hold_s)
        for b in (1, 2, 3):
            self.stack.start_broker(b)
        self._record(f"all brokers down {self.hold_s:.0f} s", start, brokers=[1, 2, 3])

    def kill_alert_driver(self) -> None:
        """The job's Spark driver JVM killed (as the kernel's OOM killer kills it): the job
        must end by itself in one line, and is started again on its checkpoint."""
        assert self.job.process is not None
        said_before = self.job.log.read_text(errors="replace").count("zkcdc: error:")
        driver = next(p for p in psutil.Process(self.job.process.pid).children(recursive=True)
                      if p.name() == "java")  # fmt: skip
        start = time.time()
        driver.kill()
        try:
            code: int | None = self.job.process.wait(60)
        except subprocess.TimeoutExpired:  # counted below as a job that did not end
            code = None
            self.job.process.kill()
            self.job.process.wait()
        said = [line for line in self.job.log.read_text(errors="replace").splitlines()
                if "zkcdc: error:" in line][said_before:]  # fmt: skip
        self.job.start()
        self._record("alert job driver kill -9", start, job_exit=code, job_said=said)

    def fill_event_log_disk(self) -> None:
        victim, start = active(self.captures), time.time()
        filler = victim.disk / "filler"
        with filler.open("wb") as out, contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * (1 << 20))
        with contextlib.suppress(subprocess.TimeoutExpired):
            assert victim.process is not None
            victim.process.wait(60)
        failed = victim.process is not None and victim.process.poll() is not None
        filler.unlink()
        if not failed:
            victim.process.kill()  # type: ignore[union-attr]
            victim.process.wait()  # type: ignore[union-attr]
        time.sleep(5)
        victim.start()
        self._record("event-log disk full, then freed", start, capture_stopped=failed)


# -- the run ---------------------------------------------------------------------------------
def main() -> None:
    p = parser(__doc__)
    p.add_argument("--minutes", type=float, help="soak length [20; --quick 6]")
    p.add_argument("--rate", type=float, default=200.0, help="storm writes per second [200]")
    args = p.parse_args()
    minutes = args.minutes or (6.0 if args.quick else 20.0)
    hold_s = 20.0 if args.quick else 60.0
    from alertmanager_server import Alertmanager, alertmanager_binary

    work = Path(tempfile.mkdtemp(prefix="zkcdc-b6-"))
    suffix = uuid.uuid4().hex[:6]
    changes_topic, alerts_topic = f"zkcdc.changes.b6-{suffix}", f"zkcdc.alerts.b6-{suffix}"
    schema = fastavro.parse_schema(json.loads((Path(__file__).parents[1] / "avro" /
                                               "ChangeRecord.avsc").read_text()))  # fmt: skip
    with (
        ensemble_stack() as (stack, info),
        tmpfs(work / "disk-0", "256m") as disk0,
        tmpfs(work / "disk-1", "256m") as disk1,
    ):
        am = Alertmanager(alertmanager_binary(), work / "am", free_port(), resolve_timeout="1m")
        captures = [Capture(i, info, work, d, changes_topic) for i, d in enumerate((disk0, disk1))]
        job = AlertJob(info, work, changes_topic, alerts_topic, am.url)
        storm = Storm(info.zookeeper_hosts + info.chroot, args.rate)
        changes = TopicWatcher(info.bootstrap_servers, changes_topic, change_of(schema))
        alerts = TopicWatcher(info.bootstrap_servers, alerts_topic, alert_of)
        sampler = Sampler(captures, am.url)
        faults = Faults(stack, captures, job, hold_s)
        try:
            captures[0].start()
            active(captures)
            captures[1].start()
            job.start()
            for thread in (storm, changes, alerts, sampler):
                thread.start()
            began = time.time()
            schedule = [
                faults.kill_active_capture,
                faults.kill_zookeeper_leader,
                faults.freeze_active_capture,
                faults.freeze_zookeeper,
                lambda: faults.kill_broker(1),
                lambda: faults.kill_broker(2),
                lambda: faults.kill_broker(3),
                faults.all_brokers_down,
                faults.kill_alert_driver,
                faults.freeze_zookeeper,
                faults.fill_event_log_disk,
            ]
            gap = (minutes * 60 - 120) / len(schedule)
            time.sleep(60)  # a minute of quiet storm first
            for n, fault in enumerate(schedule):
                due = began + 60 + n * gap
                time.sleep(max(0.0, due - time.time()))
                fault()
            time.sleep(max(0.0, began + minutes * 60 - time.time()))
            final = storm.final_versions()
            ended = time.time()
            # Everything written reaches the topic; the alert job resolves what it raised.
            with contextlib.suppress(waiting.WaitFailed):  # counted as it stands either way
                waiting.wait_until(lambda: _holds(changes.items, final), 300,
                                   what="everything written on the topic", interval_s=2)  # fmt: skip
            time.sleep(20)  # the alert job's last batches, Alertmanager's last resends
            for c in captures:
                if c.process is not None:
                    stop(c.process, 60)
            if job.process is not None:
                stop(job.process, 120)
            time.sleep(5)
        finally:
            for thread in (changes, alerts, sampler):
                thread.halt.set()
            for c in captures:
                if c.process is not None and c.process.poll() is None:
                    c.process.kill()
            if job.process is not None and job.process.poll() is None:
                job.process.kill()
            am_left = am_active(am.url)
            am.stop()
        for thread in (changes, alerts, sampler):
            thread.join(30)
        for c in captures:
            shutil.copy(c.log, work / f"kept-capture-{c.index}.log")
    result = analyse(changes.items, alerts.items, final, storm, faults.done, sampler, am_left,
                     began, ended, minutes)  # fmt: skip
    result["work"] = str(work)
    result["broker_down_alerts_in_file"] = broker_down_in(work / "alerts.jsonl")
    result = save(NAME, result, args.quick)
    plot(result, args.quick)
    print(render(result))


def broker_down_in(file: Path) -> list[dict[str, Any]]:
    """The broker_down alerts the job wrote to its file sink (to tell a lost alert's place)."""
    if not file.exists():
        return []
    alerts = (json.loads(line) for line in file.read_text().splitlines() if line.strip())
    return [{k: a[k] for k in ALERT_FIELDS} for a in alerts if a.get("rule") == "broker_down"]


def _holds(records: list[dict[str, Any]], final: dict[str, int]) -> bool:
    last: dict[str, int] = {}
    for r in records:
        if r["after"] is not None:
            last[r["path"]] = max(last.get(r["path"], -1), r["after"][1])
    return all(last.get("/" + p.lstrip("/"), -1) >= v for p, v in final.items())


def analyse(
    records: list[dict[str, Any]], alerts: list[dict[str, Any]], final: dict[str, int],
    storm: Storm, faults: list[dict[str, Any]], sampler: Sampler, am_left: set[str],
    began: float, ended: float, minutes: float,
) -> dict[str, Any]:  # fmt: skip
    by_seq: dict[int, dict[str, Any]] = {}
    duplicate_seqs = 0
    for r in records:
        if r["seq"] in by_seq:
            duplicate_seqs += 1
        by_seq[r["seq"]] = r
    seqs = sorted(by_seq)
    gaps = sum(b - a - 1 for a, b in itertools.pairwise(seqs) if b > a + 1)
    versions = Counter((r["path"], r["after"]) for r in records if r["after"] is not None)
    duplicate_versions = sum(n - 1 for n in versions.values() if n > 1)
    # Every version of every storm znode: recorded, or counted in the next record's skipped.
    seen = skipped = unaccounted = 0
    last: dict[str, Any] = {}
    for seq in seqs:
        r = by_seq[seq]
        if r["op"] == "HEARTBEAT":
            continue
        path = r["path"]
        if r["op"] != "READ" and r["before"] != last.get(path):
            unaccounted += 1  # a record that does not continue the one before it
        if r["op"] == "UPDATE" and r["before"] is not None and r["after"] is not None:
            gap = r["after"][1] - r["before"][1] - 1
            unaccounted += abs(r["skipped"] - gap)
        if r["after"] is not None:
            seen += 1
        skipped += r["skipped"]
        last[path] = r["after"]
    missing_final = [p for p, v in final.items() if (last.get(p) or (0, -1))[1] != v]
    unaccounted += len(missing_final)
    # Alerts: each broker episode's broker_down FIRING and RESOLVED exactly once.
    counts = Counter((a["alert_id"], a["status"]) for a in alerts)
    expected = []
    for fault in faults:
        for broker in fault.get("brokers", []):
            ids = {a["alert_id"] for a in alerts if a["rule"] == "broker_down"
                   and a["entity"] == f"broker/{broker}"
                   and fault["start"] * 1000 - 5000 <= a["started_ms"] <= fault["restored"] * 1000}  # fmt: skip
            for alert_id in sorted(ids) or [None]:
                expected.append({
                    "fault": fault["fault"], "broker": broker, "alert_id": alert_id,
                    "firing": counts.get((alert_id, "FIRING"), 0),
                    "resolved": counts.get((alert_id, "RESOLVED"), 0),
                    "in_alertmanager": alert_id in sampler.am_active,
                    "active_at_end": alert_id in am_left,
                })  # fmt: skip
    # Recovery: from each fault to the first record on Kafka of a write made after it.
    for fault in faults:
        after = [r["arrived"] for r in records if r["ts_ms"] > fault["start"] * 1000
                 and r["op"] in ("UPDATE", "CREATE")]  # fmt: skip
        fault["recovery_s"] = round(min(after) - fault["start"], 1) if after else None
    rss = [(round(t - began, 1), c, s, round(mb, 1)) for t, c, s, mb in sampler.rss]
    longest = Counter((c, s) for _, c, s, _ in rss).most_common(1)
    flat = None
    if longest:
        (c, s), _ = longest[0]
        series = [mb for t, ci, si, mb in rss if (ci, si) == (c, s) and t > 0]
        if len(series) > 30:
            early = sum(series[10:20]) / 10
            flat = {"capture": c, "start": s, "early_mb": round(early, 1),
                    "late_mb": round(sum(series[-10:]) / 10, 1), "max_mb": max(series),
                    "minutes": round(len(series) * 2 / 60, 1)}  # fmt: skip
    return {
        "minutes": minutes, "rate": storm.rate, "writes_made": storm.writes,
        "writes_failed_connection": storm.failed, "records_on_topic": len(records),
        "versions_seen": seen, "versions_skipped": skipped, "unaccounted": unaccounted,
        "missing_final": missing_final, "duplicate_records": duplicate_versions,
        "duplicate_seqs": duplicate_seqs, "seq_gaps": gaps,
        "daemon_exits": sum(f.get("exits", 0) for f in faults),
        "job_exits": sum(f.get("job_exits", 0) for f in faults),
        "alert_duplicates": sum(n - 1 for n in counts.values() if n > 1),
        "expected_alerts": expected, "faults": faults, "rss": rss, "rss_flat": flat,
        "began": began, "ended": ended,
        "writes_per_second": sorted(storm.per_second.items()),
        # To tell where an expected alert went: every broker registration change as the topic
        # holds it, and every broker_down alert as the alerts topic holds it.
        "broker_trail": [
            {k: r[k] for k in ("seq", "op", "path", "ts_ms", "arrived")}
            for r in records if r["path"].startswith("/brokers/ids/")
        ],
        "broker_down_alerts": [a for a in alerts if a["rule"] == "broker_down"],
    }  # fmt: skip


def plot(result: dict[str, Any], quick: bool) -> None:
    with figure(NAME, quick, (8.0, 4.5)) as fig:
        ax = fig.add_subplot(1, 1, 1)
        began = result["began"]
        for c in sorted({c for _, c, _, _ in result["rss"]}):
            for s in sorted({s for _, ci, s, _ in result["rss"] if ci == c}):
                points = [(t / 60, mb) for t, ci, si, mb in result["rss"] if (ci, si) == (c, s)]
                ax.plot(*zip(*points, strict=True), label=f"capture {c} run {s}", linewidth=1)
        for fault in result["faults"]:
            ax.axvline((fault["start"] - began) / 60, color="grey", linewidth=0.6, linestyle=":")
        ax.set_xlabel("minutes (dotted: a fault)")
        ax.set_ylabel("capture RSS (MB)")
        ax.set_title("B6: capture memory through the faults")
        ax.legend(fontsize=7, loc="lower right")


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    flat = result.get("rss_flat") or {}
    growth = (flat.get("late_mb", 0) - flat.get("early_mb", 0)) if flat else None
    exact = all(e["firing"] == 1 and e["resolved"] == 1 for e in result["expected_alerts"])
    return [
        ("unaccounted versions", fmt(result["unaccounted"]), "0", result["unaccounted"] == 0),
        ("duplicate records", fmt(result["duplicate_records"]), "0",
         result["duplicate_records"] == 0),
        ("duplicate seqs", fmt(result["duplicate_seqs"]), "0", result["duplicate_seqs"] == 0),
        ("seq gaps", fmt(result["seq_gaps"]), "0", result["seq_gaps"] == 0),
        *([("capture daemons exiting by themselves", fmt(result["daemon_exits"]), "0",
            result["daemon_exits"] == 0)] if "daemon_exits" in result else []),  # counted since
        *([("alert job exiting by itself (its driver's kill aside)", fmt(result["job_exits"]),
            "0", result["job_exits"] == 0)] if "job_exits" in result else []),  # counted since
        ("expected alerts FIRING+RESOLVED once", "yes" if exact else "no", "yes", exact),
        ("capture RSS growth", fmt(growth, " MB", 1), "flat (< 50 MB)",
         growth is not None and growth < 50),
        *([("alert job ended by itself in one line when its driver was killed",
            driver_end(kill), "exit 1, one line", kill.get("job_exit") == 1
            and len(kill.get("job_said", [])) == 1)]
          if (kill := driver_kill(result)) is not None else []),  # measured since
    ]  # fmt: skip


def driver_kill(result: dict[str, Any]) -> dict[str, Any] | None:
    """The driver-kill fault of a run that recorded how the job ended (None for older runs)."""
    return next((f for f in result["faults"] if "job_exit" in f), None)


def driver_end(kill: dict[str, Any]) -> str:
    code = kill.get("job_exit")
    ended = "did not end in 60 s" if code is None else f"exit {code}"
    lines = len(kill.get("job_said", []))
    return f"{ended}, {'one line' if lines == 1 else f'{lines} lines'}"


def render(result: dict[str, Any]) -> str:
    rows = [[f["fault"], fmt(f["start"] - result["began"], " s"),
             fmt(f.get("recovery_s"), " s", 1)] for f in result["faults"]]  # fmt: skip
    alerts = [[e["fault"], f"broker/{e['broker']}", str(e["firing"]), str(e["resolved"]),
               "yes" if e["in_alertmanager"] else "no", "yes" if e["active_at_end"] else "no"]
              for e in result["expected_alerts"]]  # fmt: skip
    flat = result.get("rss_flat") or {}
    ended = []
    if (kill := driver_kill(result)) is not None:
        said = " ".join(f"`{line.split('zkcdc: error: ', 1)[-1]}`" for line in kill["job_said"])
        ended.append(f"The alert job with its driver JVM killed: {driver_end(kill)}: {said}")
    return "\n\n".join(
        [
            f"{result['minutes']:.0f} minutes, storm {result['rate']:.0f} writes/s: "
            f"{fmt(result['writes_made'])} writes made ({fmt(result['writes_failed_connection'])} "
            f"refused during ZooKeeper faults), {fmt(result['records_on_topic'])} records on the "
            f"topic; versions seen {fmt(result['versions_seen'])}, reported skipped "
            f"{fmt(result['versions_skipped'])}, **unaccounted {fmt(result['unaccounted'])}**; "
            f"duplicate records {fmt(result['duplicate_records'])}, duplicate seqs "
            f"{fmt(result['duplicate_seqs'])}, seq gaps {fmt(result['seq_gaps'])}; duplicate alerts "
            f"{fmt(result['alert_duplicates'])}.",
            table(["fault", "at", "recovery (first new write on Kafka)"], rows),
            table(
                [
                    "episode",
                    "broker_down of",
                    "FIRING",
                    "RESOLVED",
                    "seen in Alertmanager",
                    "active at the end",
                ],
                alerts,
            ),
            f"Capture RSS (longest run, capture {flat.get('capture')} run {flat.get('start')}, "
            f"{flat.get('minutes')} min): {flat.get('early_mb')} MB early, {flat.get('late_mb')} MB "
            f"late, max {flat.get('max_mb')} MB.",
            *ended,
            plot_link(result, NAME, "B6 capture RSS through the faults"),
            reproduce(result),
        ]
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
