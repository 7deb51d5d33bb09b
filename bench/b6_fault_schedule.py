"""B6s: capture and the alert job through a random schedule of process and network faults,
then a checker over what they left (Jepsen's way: a seeded schedule, a history, a verdict).

The stack is the benchmark's own: one ZooKeeper, one broker. Every connection capture and the
job make goes through Toxiproxy (built from the Go module proxy), one proxy a pair, so a
fault hits one pair in one direction:
- `zk-0`, `zk-1`: each capture <-> ZooKeeper (one a capture, so one loses its session alone);
- `kafka-capture`: capture <-> Kafka (the broker advertises this proxy on a listener of its own);
- `kafka-job`: the alert job <-> Kafka (another listener and proxy).

The faults, drawn by a seeded random generator (the same seed gives the same schedule, printed
first): on a proxy and a direction, 500 ms of latency with 100 ms of jitter, a 16 KB/s
bandwidth cap, `reset_peer` (connections reset as they come), a black hole longer than
capture's ZooKeeper session (`timeout`: nothing passes, nothing is closed); and a capture or
the alert job killed (-9) and started again. Only `capture-1` is ever killed (active or
standby): `capture-0` lives the whole run, so its RSS is a daemon's through every takeover,
which its ZooKeeper link's faults and its peer's kills cause. Meanwhile a writer (straight to
ZooKeeper, no proxy) keeps partition states changing and takes a broker's registration away
and back now and then: each such episode must give one `broker_down` FIRING and one RESOLVED.

The checker reads the changes topic (read_committed), the active captures' event logs, the
alerts topic and the job's alert file, and the writer's own history, then counts:
- versions written that the topic neither holds nor counts as skipped (unaccounted, goal 0);
- seqs on the topic twice (duplicates, goal 0) and seqs missing between the first and the last
  (gaps, goal 0); seqs in an event log that the topic lacks (goal 0);
- each expected `broker_down` FIRING and RESOLVED exactly once, on the topic and in the file;
- the alerts (topic and file) against `zkcdc replay LOG --alerts-out` over the event log of
  the same records: equal as multisets (alert id and status);
- daemons that exited by themselves (goal 0).
Exit status 0 when every count is at its goal, 1 otherwise (so `make test` runs `--quick`).

Run: `.venv/bin/python bench/b6_fault_schedule.py [--quick] [--seed N] [--minutes M]`.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import ZKCDC, figure, fmt, load, parser, plot_link, results_dir, save, table

from zkcdc.ground import waiting

NAME = "b6_fault_schedule"
CLUSTER = "fs"
CHROOT = "/fs"
TOXIPROXY = "github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0"
SESSION_S = 4  # capture's ZooKeeper session: a black hole outlasts it
BROKER_DOWN_FOR_MS = 1_000
EPISODE_S = BROKER_DOWN_FOR_MS / 1000 + 3  # a broker taken away this long
PROXIES = ("zk-0", "zk-1", "kafka-capture", "kafka-job")
NETWORK = ("latency", "bandwidth", "reset_peer", "blackhole")
PROCESS = ("kill-capture", "kill-job")
# A process fault is drawn this much less often than a network fault of one kind: a killed job
# is a Spark start (~20 CPU-s here), and one killed every minute on two cores would never catch
# up; this way a long schedule kills each about every 5 minutes.
PROCESS_WEIGHT = 0.2
CATCH_UP_STALL_S = 300  # the job's catch-up after the schedule fails only when it stops moving


# -- the schedule ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Fault:
    at_s: float  # from the schedule's start
    kind: str  # one of NETWORK or PROCESS
    proxy: str = ""  # NETWORK: which pair
    stream: str = ""  # NETWORK: upstream (to the server) or downstream (to the client)
    hold_s: float = 0.0  # NETWORK: how long it lasts

    def describe(self) -> str:
        if self.kind in PROCESS:
            return f"{self.at_s:6.1f}s {self.kind}"
        return f"{self.at_s:6.1f}s {self.kind} on {self.proxy} {self.stream} for {self.hold_s:.0f}s"


# The quick schedule: one fault of each of these, in an order (and directions, lengths) drawn
# from the seed: a black hole past capture's session, each other pair faulted, both kills.
QUICK = (("blackhole", "zk-0"), ("reset_peer", "kafka-capture"), ("latency", "kafka-job"),
         ("kill-capture", ""), ("kill-job", ""))  # fmt: skip


def schedule(
    seed: int, minutes: float, episodes: int, quick: bool = False
) -> tuple[list[Fault], list[float]]:
    """(the faults, when a broker episode starts), all drawn from `seed`: network faults on each
    proxy in both directions, process faults among them, none overlapping. `quick`: QUICK's
    five, in `minutes` at most."""
    rng = random.Random(seed)
    end = minutes * 60
    faults: list[Fault] = []
    at = 5.0
    drawn = rng.sample(QUICK, len(QUICK)) if quick else None
    while (at < end - 10) if drawn is None else drawn:
        kind, proxy = drawn.pop(0) if drawn is not None else (_kind(rng), "")
        if kind in PROCESS:
            faults.append(Fault(at, kind))
            at += rng.uniform(8, 12)
            continue
        hold = SESSION_S + rng.uniform(1, 4) if kind == "blackhole" else rng.uniform(3, 8)
        stream = rng.choice(["upstream", "downstream"])
        faults.append(Fault(at, kind, proxy or rng.choice(PROXIES), stream, round(hold, 1)))
        at += hold + rng.uniform(3, 6)
    starts = sorted(rng.uniform(5, min(end, at) - 15) for _ in range(episodes))
    return faults, starts


def _kind(rng: random.Random) -> str:
    kinds = [*NETWORK, *PROCESS]
    return rng.choices(kinds, weights=[1.0] * len(NETWORK) + [PROCESS_WEIGHT] * len(PROCESS))[0]


# -- Toxiproxy ------------------------------------------------------------------------------
class Toxiproxy:
    """A Toxiproxy server of the run's own, driven through its HTTP API."""

    def __init__(self, work: Path) -> None:
        from go_tools import ensure_go_binary

        from zkcdc.stack.probes import free_port_block

        self.port = free_port_block(1)
        binary = ensure_go_binary("server", TOXIPROXY)
        self.log = (work / "toxiproxy.log").open("wb")
        self.process = subprocess.Popen(
            [str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait(lambda: self._ok("/version"), 30, "Toxiproxy to answer")

    def _ok(self, path: str) -> bool:
        url = f"http://127.0.0.1:{self.port}{path}"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2):
            return True
        return False

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def proxy(self, name: str, listen: int, upstream: int) -> None:
        self.call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen}",
                                       "upstream": f"127.0.0.1:{upstream}", "enabled": True})  # fmt: skip

    def toxic(self, fault: Fault) -> str:
        attributes: dict[str, dict[str, int]] = {
            "latency": {"latency": 500, "jitter": 100},
            "bandwidth": {"rate": 16},
            "reset_peer": {"timeout": 0},
            "blackhole": {"timeout": 0},
        }
        kind = "timeout" if fault.kind == "blackhole" else fault.kind
        name = f"{fault.kind}-{fault.stream}-{uuid.uuid4().hex[:6]}"
        self.call("POST", f"/proxies/{fault.proxy}/toxics", {
            "name": name, "type": kind, "stream": fault.stream, "toxicity": 1.0,
            "attributes": attributes[fault.kind],
        })  # fmt: skip
        return name

    def remove(self, proxy: str, name: str) -> None:
        self.call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def close(self) -> None:
        self.process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self.process.poll() is None:
            self.process.kill()
        self.log.close()


def wait(check: Any, timeout_s: float, what: str) -> None:
    try:
        waiting.wait_until(check, timeout_s, what=what, interval_s=0.2)
    except waiting.WaitFailed as exc:
        raise RuntimeError(str(exc)) from None


# -- the stack -------------------------------------------------------------------------------
@dataclass
class Ports:
    zk: int
    broker: int
    capture_listener: int
    job_listener: int
    zk_proxies: tuple[int, int]
    capture_proxy: int
    job_proxy: int


@contextlib.contextmanager
def fault_stack(work: Path) -> Iterator[tuple[Any, Ports]]:
    """One ZooKeeper and one broker with two more listeners, each advertised at its proxy."""
    from zkcdc.stack import LocalStack, StackSettings
    from zkcdc.stack.probes import free_port_block

    block = free_port_block(8)
    ports = Ports(block, block + 1, block + 2, block + 3, (block + 4, block + 5), block + 6,
                  block + 7)  # fmt: skip
    listeners = {
        "listeners": f"PLAINTEXT://127.0.0.1:{ports.broker},CAPTURE://127.0.0.1:"
        f"{ports.capture_listener},JOB://127.0.0.1:{ports.job_listener}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ports.broker},CAPTURE://127.0.0.1:"
        f"{ports.capture_proxy},JOB://127.0.0.1:{ports.job_proxy}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CAPTURE:PLAINTEXT,JOB:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    settings = StackSettings(state_dir=work / "stack", brokers=1, zookeeper_port=ports.zk,
                             kafka_port=ports.broker, broker_config=listeners)  # fmt: skip
    stack = LocalStack(settings)
    try:
        yield stack.up(), ports
    finally:
        stack.down()


# -- the writer ------------------------------------------------------------------------------
@dataclass
class Writer:
    """Keeps a small Kafka tree changing, straight on ZooKeeper, and takes brokers away and
    back at the scheduled times; its history is what the checker holds capture to."""

    hosts: str
    episodes: list[float]
    written: dict[str, set[int]] = field(default_factory=dict)  # path -> versions written
    downs: list[tuple[int, float, float]] = field(default_factory=list)  # broker, from, to
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def build(self) -> None:
        from kazoo.client import KazooClient

        from zkcdc.simulate import formats

        root = KazooClient(hosts=self.hosts)
        root.start(30)
        root.ensure_path(CHROOT)
        root.stop()
        self.zk = KazooClient(hosts=self.hosts + CHROOT)
        self.zk.start(30)
        zk, now = self.zk, int(time.time() * 1000)
        zk.create("/controller_epoch", formats.controller_epoch(1), makepath=True)
        zk.create("/controller", formats.controller(1, now), ephemeral=True)
        for b in (1, 2, 3):
            self._register(b)
        replicas = {p: [1 + (p + i) % 3 for i in range(3)] for p in range(6)}
        zk.create("/brokers/topics/t", formats.topic_assignment(replicas, "AAAAAAAAAAAAAAAAAAAAAA"),
                  makepath=True)  # fmt: skip
        for p, r in replicas.items():
            zk.create(self._state(p), formats.partition_state(r[0], 0, r, 1), makepath=True)

    def _register(self, broker: int) -> None:
        from zkcdc.simulate import formats

        data = formats.broker_registration(broker, "127.0.0.1", 9000 + broker,
                                           int(time.time() * 1000))  # fmt: skip
        self.zk.create(f"/brokers/ids/{broker}", data, ephemeral=True, makepath=True)

    @staticmethod
    def _state(p: int) -> str:
        return f"/brokers/topics/t/partitions/{p}/state"

    def run(self, started: float) -> None:
        from zkcdc.simulate import formats

        try:
            rng = random.Random(len(self.episodes))
            pending = list(self.episodes)
            epoch = 0
            while not self.stop.is_set():
                if pending and time.monotonic() - started >= pending[0]:
                    pending.pop(0)
                    # The next episode at least a second after this one's end: a registration
                    # that lives milliseconds is below what a watch sees (capture counts it as
                    # a skipped version and the two episodes are one down for the rules).
                    pending = [
                        max(at, time.monotonic() - started + EPISODE_S + 1) for at in pending
                    ]
                    broker = rng.choice([2, 3])
                    begun = time.time()
                    self.zk.delete(f"/brokers/ids/{broker}")
                    self.stop.wait(EPISODE_S)
                    self._register(broker)
                    self.downs.append((broker, begun, time.time()))
                    continue
                p = rng.randrange(6)
                epoch += 1
                isr = [1, 2, 3] if epoch % 2 else [1 + p % 3]
                stat = self.zk.set(
                    self._state(p), formats.partition_state(1 + p % 3, epoch, isr, 1)
                )
                self.written.setdefault(self._state(p), set()).add(stat.version)
                self.stop.wait(0.05)  # fixed wait: the writer's pace, 20 writes/s
        except BaseException as exc:  # said by the checker: the run's history is incomplete
            self.error = exc

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


# -- the daemons -----------------------------------------------------------------------------
class Daemon:
    """A zkcdc process the schedule may kill and start again; exits it did not cause count."""

    def __init__(self, name: str, args: list[str], work: Path) -> None:
        self.name, self.args = name, args
        self.log = work / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.own_exits = 0
        self.instance = 0  # how many times it was started
        self.rss: list[tuple[float, int, float]] = []  # (time, instance, RSS MB)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        self.instance += 1

    def sample(self, now: float) -> None:
        import psutil

        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(psutil.Error):
                mb = psutil.Process(self.process.pid).memory_info().rss / 2**20
                self.rss.append((now, self.instance, round(mb, 1)))

    def check(self) -> None:
        """Counts an exit it found (and starts it again, as a supervisor would)."""
        if self.process is not None and self.process.poll() is not None:
            self.own_exits += 1
            self.start()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.start()

    def halt(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait(30)
        return self.process.returncode


# -- the checker -----------------------------------------------------------------------------
@dataclass
class Verdict:
    unaccounted: int = 0
    duplicates: int = 0
    gaps: int = 0
    not_on_topic: int = 0
    daemon_exits: int = 0
    expected_alerts: int = 0
    alerts_once: int = 0  # expected alerts with exactly one FIRING and one RESOLVED, topic and file
    # Broker episodes no alert can be expected of, as the records show them: inside a fault
    # that blinds capture (ZooKeeper's link faulted, capture killed) or with the broker still
    # gone from the episode before (hidden); outside any such fault but seen as a registration
    # replaced at one read (a takeover that outlasted the fault's window: one_read); or not in
    # the records at all (lost, goal 0).
    hidden_episodes: int = 0
    one_read_episodes: int = 0
    lost_episodes: int = 0
    topic_vs_replay: int = 0  # alert lines in one and not the other (multisets)
    file_vs_replay: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        counts = (self.unaccounted, self.duplicates, self.gaps, self.not_on_topic,
                  self.daemon_exits, self.topic_vs_replay, self.file_vs_replay,
                  self.lost_episodes)  # fmt: skip
        return not any(counts) and self.alerts_once == self.expected_alerts and not self.notes


def check_records(
    records: list[dict[str, Any]], written: dict[str, set[int]], logged: set[int]
) -> Verdict:
    """The changes topic's records against what was written and what the event logs hold."""
    verdict = Verdict()
    seqs = Counter(r["seq"] for r in records)
    verdict.duplicates = sum(n - 1 for n in seqs.values() if n > 1)
    if seqs:
        verdict.gaps = (max(seqs) - min(seqs) + 1) - len(seqs)
    verdict.not_on_topic = len(logged - set(seqs))
    for path, versions in written.items():
        mine = [r for r in records if r["path"] == path]
        seen = {r["after"]["version"] for r in mine if r["after"]}
        skipped = sum(r["versions_skipped"] for r in mine)
        verdict.unaccounted += max(0, len(versions - seen) - skipped)
    return verdict


def captured_downs(records: list[dict[str, Any]], broker: int) -> list[tuple[int, int | None]]:
    """Each time the records show the broker's registration gone, in seq order: (the DELETE's
    event time, the event time it came back, None if it had not). A DELETE while already gone
    (a registration that lived too briefly for a watch to see, counted as a skipped version)
    and a CREATE while registered (a new registration seen at one read) start or end nothing."""
    path = f"/brokers/ids/{broker}"
    mine = sorted({r["seq"]: r for r in records if r["path"] == path}.values(),
                  key=lambda r: r["seq"])  # fmt: skip
    downs: list[tuple[int, int | None]] = []
    gone: int | None = None
    for r in mine:
        if r["op"] == "DELETE" and gone is None:
            gone = r["ts_ms"]
        elif r["op"] in ("CREATE", "READ", "UPDATE") and gone is not None:
            downs.append((gone, r["ts_ms"]))
            gone = None
    if gone is not None:
        downs.append((gone, None))
    return downs


def _next_is_one_read(gone: list[tuple[int, int | None]], since_ms: float) -> bool:
    """Whether capture's next sight of the registration after `since_ms` was a replacement at
    one read: a DELETE and its CREATE too close in event time for the rule (the CREATE's time
    is the new registration's own ctime, the DELETE's when capture saw it)."""
    later = [(d, c) for d, c in gone if d >= since_ms]
    return (
        bool(later) and later[0][1] is not None and later[0][1] - later[0][0] < BROKER_DOWN_FOR_MS
    )


def check_alerts(
    verdict: Verdict,
    downs: list[tuple[int, float, float]],
    on_topic: list[dict[str, Any]],
    in_file: list[dict[str, Any]],
    replayed: list[dict[str, Any]],
    records: list[dict[str, Any]],
    blind: Sequence[tuple[float, float]] = (),
) -> None:
    """Each time the changes topic shows a broker gone for the rule's for-duration: broker_down
    FIRING and RESOLVED once (topic and file), started within it. Each of the writer's
    episodes is then explained by the records (seen: such a time starts within it), hidden (a
    fault blinded capture across it, or its broker was still gone as capture saw it), or lost.
    Both sinks' alerts against the replay's."""

    def lines(alerts: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
        return Counter((a["alert_id"], a["status"]) for a in alerts)

    seen = {b: captured_downs(records, b) for b in sorted({b for b, _, _ in downs})}
    alertable = {b: [(d, c) for d, c in gone if c is not None and c - d >= BROKER_DOWN_FOR_MS]
                 for b, gone in seen.items()}  # fmt: skip
    verdict.expected_alerts = sum(len(v) for v in alertable.values())
    for broker, spans in alertable.items():
        for gone, back in spans:
            ok = True
            for alerts in (on_topic, in_file):
                mine = [a for a in alerts if a["rule"] == "broker_down"
                        and a["entity"].endswith(str(broker))
                        and gone <= a["started_ms"] < back]  # fmt: skip
                ok &= sorted(a["status"] for a in mine) == ["FIRING", "RESOLVED"]
            verdict.alerts_once += ok
    for i, (broker, began, ended) in enumerate(downs):
        later = [b_began for b, b_began, _ in downs[i + 1 :] if b == broker]
        until = (later[0] if later else ended + 60) * 1000
        if any(began * 1000 - 2_000 <= d < until for d, _ in alertable[broker]):
            continue
        still_gone = any(d < began * 1000 and (c is None or c > began * 1000)
                         for d, c in seen[broker])  # fmt: skip
        if still_gone or any(start <= ended and began <= end for start, end in blind):
            verdict.hidden_episodes += 1
        elif _next_is_one_read(seen[broker], began * 1000 - 2_000):
            verdict.one_read_episodes += 1
        else:
            verdict.lost_episodes += 1
    expected = lines(replayed)
    verdict.topic_vs_replay = sum(
        ((lines(on_topic) - expected) + (expected - lines(on_topic))).values()
    )
    verdict.file_vs_replay = sum(
        ((lines(in_file) - expected) + (expected - lines(in_file))).values()
    )


def read_changes(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    from zkcdc.ground.change_values import ChangeValueDecoder
    from zkcdc.ground.kafka_connection import KafkaConnection

    decoder, out = ChangeValueDecoder(), []
    KafkaConnection(bootstrap_servers=bootstrap).read_to_end(
        topic, lambda m: out.append(decoder.decode(m.value())), timeout_s=60
    )
    return [r for r in out if r["cluster"] == CLUSTER]


def read_alerts(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    from zkcdc.ground.kafka_connection import KafkaConnection

    out: list[dict[str, Any]] = []
    KafkaConnection(bootstrap_servers=bootstrap).read_to_end(
        topic, lambda m: out.append(json.loads(m.value())), timeout_s=60
    )
    return out


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- the run ---------------------------------------------------------------------------------
def run(
    seed: int, minutes: float, episodes: int, work: Path, quick: bool
) -> tuple[Verdict, dict[str, Any]]:
    from zkcdc.capture.delivery.event_log import log_files, read_records
    from zkcdc.stack.probes import free_port_block

    faults, starts = schedule(seed, minutes, episodes, quick)
    if quick:  # as long as its five faults take
        minutes = (faults[-1].at_s + faults[-1].hold_s + 10) / 60
    print(f"seed {seed}: {len(faults)} faults, broker episodes at "
          f"{', '.join(f'{s:.0f}s' for s in starts)}", file=sys.stderr)  # fmt: skip
    for fault in faults:
        print("  " + fault.describe(), file=sys.stderr)
    rules = ["--rule", f"broker_down_for_ms={BROKER_DOWN_FOR_MS}"]
    daemons: list[Daemon] = []
    with fault_stack(work) as (info, ports):
        toxiproxy = Toxiproxy(work)
        try:
            for i, zk_proxy in enumerate(ports.zk_proxies):
                toxiproxy.proxy(f"zk-{i}", zk_proxy, ports.zk)
            toxiproxy.proxy("kafka-capture", ports.capture_proxy, ports.capture_listener)
            toxiproxy.proxy("kafka-job", ports.job_proxy, ports.job_listener)
            writer = Writer(info.zookeeper_hosts, starts)
            writer.build()
            topic, alerts_topic = f"zkcdc.changes.fs-{seed}", f"zkcdc.alerts.fs-{seed}"
            captures = [
                Daemon(f"capture-{i}", [
                    *ZKCDC, "capture", "--zookeeper", f"127.0.0.1:{ports.zk_proxies[i]}{CHROOT}",
                    "--bootstrap-servers", f"127.0.0.1:{ports.capture_proxy}", "--topic", topic,
                    "--cluster", CLUSTER, "--event-log", str(work / f"events-{i}"),
                    "--state-dir", str(work / f"state-{i}"), "--ha-path", "/zkcdc-fs/ha",
                    "--session-timeout-s", str(SESSION_S), "--wait",
                    "--metrics-port", str(free_port_block(1)),
                ], work)
                for i in range(2)
            ]  # fmt: skip
            alerts_out = work / "alerts.jsonl"
            job = Daemon("alert-job", [
                *ZKCDC, "stream", "alerts", "--bootstrap-servers",
                f"127.0.0.1:{ports.job_proxy}", "--topic", topic, "--alerts-topic", alerts_topic,
                "--no-state", "--alerts-out", str(alerts_out),
                # A backlog (after a kill, an outage) in several micro-batches, not one: the
                # job's order across partitions is then at stake too.
                "--max-records-per-batch", "200",
                # Correctness, not latency, is measured: a micro-batch a second leaves CPU for
                # the other daemons (and the other seeds' runs beside this one).
                "--trigger-ms", "1000",
                "--checkpoint", str(work / "checkpoint"), *rules,
            ], work)  # fmt: skip
            daemons += [*captures, job]
            for daemon in daemons:
                daemon.start()
            # The writes begin once a capture has read its snapshot: a version written while
            # the snapshot is read, before the snapshot reads its znode, is history before the
            # capture's start (the snapshot counts no version before the one it reads).
            wait(lambda: any(c.log.exists() and '"event": "in sync"' in c.log.read_text()
                             for c in captures), 120, "a capture in sync")  # fmt: skip
            started, started_wall = time.monotonic(), time.time()
            watch = Watch(captures)
            worker = threading.Thread(target=writer.run, args=(started,), daemon=True)
            worker.start()
            for fault in faults:
                while time.monotonic() - started < fault.at_s:
                    for daemon in (*captures, job):
                        daemon.check()
                    watch.tick(time.monotonic())
                    time.sleep(0.2)  # fixed wait: the schedule's clock
                inject(fault, toxiproxy, captures, job)
            while time.monotonic() - started < minutes * 60:
                for daemon in (*captures, job):
                    daemon.check()
                watch.tick(time.monotonic())
                time.sleep(0.2)  # fixed wait: the schedule's clock
            writer.stop.set()
            worker.join(60)
            # Quiet: every toxic gone; the last records and alerts come through.
            time.sleep(BROKER_DOWN_FOR_MS / 1000 + 8)  # fixed wait: for-durations and heartbeats
            for daemon in (*captures, job):
                daemon.check()
            watch.next_at = 0.0  # a last sample: capture-0 lived the schedule through
            watch.tick(time.monotonic())
            for daemon in captures:
                daemon.stop()
            changes = read_changes(info.bootstrap_servers, topic)
            wait_caught_up(work / "checkpoint", info.bootstrap_servers, topic, job)
            exits = sum(d.own_exits for d in (*captures, job))  # the job's in its catch-up too
            job.stop()
            on_topic = read_alerts(info.bootstrap_servers, alerts_topic)
            logged: set[int] = set()
            for i in range(2):
                if (work / f"events-{i}").exists():
                    logged |= {r["seq"] for f in log_files(work / f"events-{i}")
                               for r in read_records(f) if r["cluster"] == CLUSTER}  # fmt: skip
            verdict = check_records(changes, writer.written, logged)
            verdict.daemon_exits = exits
            replay_log = merged_log(work, changes)
            replay_out = work / "replayed.jsonl"
            replayed = subprocess.run([*ZKCDC, "replay", str(replay_log), "--alerts-out",
                                       str(replay_out), *rules],
                                      capture_output=True, text=True, timeout=600)  # fmt: skip
            if replayed.returncode != 0:
                verdict.notes.append(f"replay failed: {replayed.stderr.strip()[-300:]}")
            # Wall-clock windows in which capture may be blind: ZooKeeper's link faulted (to
            # its session's end and a re-walk after), or the active capture killed (to a
            # standby's takeover).
            blind = [(started_wall + f.at_s, started_wall + f.at_s + f.hold_s + 3 * SESSION_S)
                     for f in faults if f.proxy.startswith("zk") or f.kind == "kill-capture"]  # fmt: skip
            check_alerts(verdict, writer.downs, on_topic, json_lines(alerts_out),
                         json_lines(replay_out) if replay_out.exists() else [],
                         changes, blind)  # fmt: skip
            if writer.error is not None:
                verdict.notes.append(f"the writer failed: {writer.error!r}")
            writer.close()
        finally:
            for daemon in daemons:  # a run that failed leaves nothing running
                daemon.halt()
            toxiproxy.close()
    history = {"faults": [f.__dict__ for f in faults], "episodes": writer.downs,
               "records": len(changes), "writes": sum(len(v) for v in writer.written.values()),
               "takeovers": watch.takeovers, "capture_rss": rss_lives(captures, started),
               "takeover_min": [round((t - started) / 60, 2) for t in watch.took_over_at]}  # fmt: skip
    return verdict, history


@dataclass
class Watch:
    """Each capture's RSS and the active capture, sampled on the schedule's clock."""

    captures: list[Daemon]
    every_s: float = 5.0
    next_at: float = 0.0
    active: str | None = None
    takeovers: int = 0
    took_over_at: list[float] = field(default_factory=list)  # when one was seen (monotonic)

    def tick(self, now: float) -> None:
        if now < self.next_at:
            return
        self.next_at = now + self.every_s
        for capture in self.captures:
            capture.sample(now)
        active = next((c.name for c in self.captures if role(c) == "active"), None)
        if active is not None and self.active is not None and active != self.active:
            self.takeovers += 1
            self.took_over_at.append(now)
        self.active = active or self.active


def rss_lives(captures: list[Daemon], started: float) -> list[dict[str, Any]]:
    """Each capture process's RSS over its life: early (its minutes 2-5), late (its last three
    minutes), growth between them and its peak, in MB; for one that lived 10 minutes or more,
    its series too, a point a minute (the plot's)."""
    out = []
    for capture in captures:
        for instance in sorted({i for _, i, _ in capture.rss}):
            series = [(t, mb) for t, i, mb in capture.rss if i == instance]
            first, last = series[0][0], series[-1][0]
            early = [mb for t, mb in series if 120 <= t - first <= 300]
            late = [mb for t, mb in series if last - t <= 180]
            middle = sorted(early)[len(early) // 2] if early else None
            end = sorted(late)[len(late) // 2]
            out.append({"daemon": capture.name, "instance": instance,
                        "from_min": round((first - started) / 60, 1),
                        "lived_min": round((last - first) / 60, 1),
                        "early_mb": middle, "late_mb": end,
                        "growth_mb": None if middle is None else round(end - middle, 1),
                        "peak_mb": max(mb for _, mb in series),
                        "series": [] if last - first < 600 else [
                            [round((t - started) / 60, 2), mb]
                            for t, mb in series[::max(1, round(60 / Watch.every_s))]]})  # fmt: skip
    return out


def inject(fault: Fault, toxiproxy: Toxiproxy, captures: list[Daemon], job: Daemon) -> None:
    if fault.kind == "kill-job":
        job.kill()
        return
    if fault.kind == "kill-capture":
        captures[-1].kill()  # the mortal one: the first lives the whole run (its RSS)
        return
    name = toxiproxy.toxic(fault)
    time.sleep(fault.hold_s)  # fixed wait: the fault's length (the schedule's do not overlap)
    toxiproxy.remove(fault.proxy, name)


def role(daemon: Daemon) -> str | None:
    """What a capture's /livez says it is ("active", "standby"), None if it does not answer."""
    port = daemon.args[daemon.args.index("--metrics-port") + 1]
    url = f"http://127.0.0.1:{port}/livez"
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
        return str(answer.read().decode().strip())
    return None


def wait_caught_up(checkpoint: Path, bootstrap: str, topic: str, job: Daemon) -> None:
    """Until the job has read the topic to its end; fails when its micro-batches stop coming
    for CATCH_UP_STALL_S (a long schedule's backlog takes as long as it takes)."""
    batches, moved = -1, time.monotonic()
    while not job_caught_up(checkpoint, bootstrap, topic):
        job.check()
        done = len(list((checkpoint / "alerts" / "commits").glob("[0-9]*")))
        if done != batches:
            batches, moved = done, time.monotonic()
        elif time.monotonic() - moved > CATCH_UP_STALL_S:
            raise RuntimeError(f"the alert job committed no micro-batch for {CATCH_UP_STALL_S} s "
                               f"before reading the changes topic to its end")  # fmt: skip
        time.sleep(1)  # fixed wait: the poll's interval between looks


def job_caught_up(checkpoint: Path, bootstrap: str, topic: str) -> bool:
    from confluent_kafka import TopicPartition

    from zkcdc.ground.kafka_connection import KafkaConnection

    commits = sorted((checkpoint / "alerts" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    if not commits:
        return False
    offsets_file = checkpoint / "alerts" / "offsets" / commits[-1].name
    if not offsets_file.exists():
        return False
    read = json.loads(offsets_file.read_text().splitlines()[-1]).get(topic, {})
    consumer = KafkaConnection(bootstrap_servers=bootstrap).consumer("fs-check", quiet=True)
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        for p in metadata.partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if int(read.get(str(p), 0)) < high - 1:  # a commit marker stands at the end
                return False
        return True
    finally:
        consumer.close()


def merged_log(work: Path, changes: list[dict[str, Any]]) -> Path:
    """One event log of the records the topic holds, in seq order, for the replay: each
    capture's log holds its own terms only."""
    import fastavro

    from zkcdc.capture.encoding.avro_codec import load_schema

    folder = work / "replay-log"
    folder.mkdir(exist_ok=True)
    unique = {r["seq"]: r for r in changes}
    with (folder / f"{CLUSTER}.00000000000000000001.avro").open("wb") as out:
        fastavro.writer(out, load_schema(), [unique[s] for s in sorted(unique)], codec="deflate")
    return folder


def render(r: dict[str, Any]) -> str:
    rows = [
        [str(run["seed"]), run.get("at", "—"), fmt(run["minutes"], digits=1),
         str(len(run["faults"])),
         str(run["expected_alerts"]), f"{run['records']:,}", f"{run['writes']:,}",
         fmt(run["unaccounted"]), fmt(run["duplicates"]), fmt(run["gaps"]),
         fmt(run["not_on_topic"]), fmt(run["daemon_exits"]),
         f"{run['alerts_once']} of {run['expected_alerts']}",
         f"{run.get('hidden_episodes', 0)} / {run.get('one_read_episodes', 0)} / "
         f"{run.get('lost_episodes', 0)}",
         fmt(run["topic_vs_replay"]), fmt(run["file_vs_replay"])]
        for run in r["runs"]
    ]  # fmt: skip
    kinds = Counter(f["kind"] for run in r["runs"] for f in run["faults"])
    lives = [
        [str(run["seed"]), life["daemon"], str(life["instance"]), fmt(life["lived_min"], digits=1),
         fmt(life["early_mb"], digits=1), fmt(life["late_mb"], digits=1),
         fmt(life["growth_mb"], digits=1), fmt(life["peak_mb"], digits=1)]
        for run in r["runs"] for life in run.get("capture_rss", []) if life["lived_min"] >= 10
    ]  # fmt: skip
    return "\n\n".join([
        f"Measured {r['measured']} (`{r['command']}`).",
        table(["seed", "run at", "min", "faults", "episodes", "records", "writes", "unaccounted",
               "duplicates", "gaps", "not on topic", "exits", "alerts once",
               "episodes hidden / at one read / lost", "topic/replay", "file/replay"], rows),
        "Faults by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        + "; takeovers: " + ", ".join(str(run.get("takeovers", "-")) for run in r["runs"]) + ".",
        "Capture's RSS, each process that lived 10 minutes or more (MB: early = its minutes "
        "2-5, late = its last 3):",
        table(["seed", "daemon", "start", "lived (min)", "early", "late", "growth", "peak"],
              lives),
        *([plot_link(r, NAME, "B6s: capture's RSS through the takeovers, one panel a seed")]
          if any(life.get("series") for run in r["runs"] for life in run["capture_rss"]) else []),
    ])  # fmt: skip


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}: the run's daemons and stack go down")


@contextlib.contextmanager
def results_lock(quick: bool) -> Iterator[None]:
    import fcntl

    results_dir(quick).mkdir(parents=True, exist_ok=True)
    with (results_dir(quick) / f".{NAME}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def plot(r: dict[str, Any], quick: bool) -> None:
    """Each capture process's RSS that lived 10 minutes or more, a panel a run, with the
    takeovers it lived through."""
    runs = [run for run in r["runs"] if any(life.get("series") for life in run["capture_rss"])]
    if not runs:
        return
    with figure(NAME, quick, (9.0, 2.6 * len(runs))) as fig:
        for n, run in enumerate(runs):
            ax = fig.add_subplot(len(runs), 1, n + 1)
            for life in run["capture_rss"]:
                if life.get("series"):
                    ax.plot(*zip(*life["series"], strict=True), linewidth=1,
                            label=f"{life['daemon']} (start {life['instance']})")  # fmt: skip
            for at in run.get("takeover_min", []):
                ax.axvline(at, color="grey", linewidth=0.5, linestyle=":")
            ax.set_ylim(bottom=0)
            ax.set_ylabel("RSS (MB)")
            ax.set_title(f"seed {run['seed']}: {run['takeovers']} takeovers (dotted), "
                         f"{len(run['faults'])} faults", fontsize=9)  # fmt: skip
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel("minutes into the schedule")


def targets(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    runs = r["runs"]
    long_runs = [run for run in runs if run["minutes"] >= 120]
    clean = [run for run in runs if run["ok"]]
    grown = [life["growth_mb"] for run in long_runs for life in run.get("capture_rss", [])
             if life["lived_min"] >= 120 and life["growth_mb"] is not None]  # fmt: skip
    takeovers = min((run.get("takeovers", 0) for run in long_runs), default=0)
    return [
        ("fault schedule: capture's RSS growth over 2 hours or more, at least 4 takeovers",
         f"{fmt(max(grown, default=None), digits=1)} MB, {takeovers} takeovers", "< 50 MB, >= 4",
         bool(grown) and max(grown) < 50 and takeovers >= 4),
        ("fault schedule: runs of 2 hours or more, each seed its own",
         str(len(long_runs)), "3", len(long_runs) >= 3),
        ("fault schedule: runs with every count at its goal", f"{len(clean)} of {len(runs)}",
         "all", len(clean) == len(runs)),
    ]  # fmt: skip


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--seed", type=int, default=None, help="the schedule's seed [random]")
    p.add_argument("--minutes", type=float, default=None, help="the schedule's length")
    p.add_argument("--runs", type=int, default=1, help="runs, each with a seed of its own")
    p.add_argument("--keep", type=Path, default=None, help="keep the run's files here")
    p.add_argument("--no-save", action="store_true", help="write no result file (the test)")
    p.add_argument("--append", action="store_true",
                   help="keep the result file's earlier runs (other seeds) beside this one's: "
                        "two-hour runs taken one at a time")  # fmt: skip
    p.add_argument("--plot", action="store_true", help="draw the figure from the results file")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, _terminated)
    if args.plot:
        plot(load(NAME, args.quick) or {"runs": []}, args.quick)
        return 0
    minutes = args.minutes or (1.5 if args.quick else 120.0)
    episodes = max(2, int(minutes * 2))
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    results, ok = [], True
    for n in range(args.runs):
        seed = first + n
        work = args.keep or Path(tempfile.mkdtemp(prefix=f"zkcdc-b6s-{seed}-"))
        work.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        try:
            verdict, history = run(seed, minutes, episodes, work, args.quick)
        finally:
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
        ok &= verdict.ok
        results.append({"seed": seed, "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "minutes": minutes, "took_s": round(time.monotonic() - began),
                        "ok": verdict.ok, **verdict.__dict__, **history})  # fmt: skip
        print(table(["seed", "unaccounted", "duplicates", "gaps", "not on topic", "exits",
                     "alerts once", "hidden / one read / lost", "topic/replay", "file/replay"],
                    [[str(seed), fmt(verdict.unaccounted), fmt(verdict.duplicates),
                      fmt(verdict.gaps), fmt(verdict.not_on_topic), fmt(verdict.daemon_exits),
                      f"{verdict.alerts_once} of {verdict.expected_alerts}",
                      f"{verdict.hidden_episodes} / {verdict.one_read_episodes} / "
                      f"{verdict.lost_episodes}",
                      fmt(verdict.topic_vs_replay), fmt(verdict.file_vs_replay)]]))  # fmt: skip
        for note in verdict.notes:
            print(f"note: {note}", file=sys.stderr)
    if not args.no_save:
        # Runs of other seeds may be going on beside this one, each to append when it ends.
        with results_lock(args.quick):
            earlier = (load(NAME, args.quick) or {}).get("runs", []) if args.append else []
            seeds = {run["seed"] for run in results}
            saved = save(NAME, {"runs": [r for r in earlier if r["seed"] not in seeds] + results},
                         args.quick)  # fmt: skip
        plot(saved, args.quick)
    print("verdict: " + ("every count at its goal" if ok else "FAILED"), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
