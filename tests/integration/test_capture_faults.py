"""Nothing lost when a turn fails: `zkcdc capture` made to fail (a raised error or SIGKILL) at each
step of a turn through its named failpoints, while a writer keeps changing znodes, then started
again. The event log must hold a contiguous `seq`, every version of every znode recorded or
counted as skipped, and the topic each logged record exactly once. Watch and txnlog modes."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from kazoo.client import KazooClient
from log_accounting import account, assert_each_once
from zookeeper_servers import zookeeper_server

from zkcdc.capture.delivery.event_log import read_records

pytestmark = pytest.mark.integration

PATHS = [f"/brokers/topics/t/partitions/{p}/state" for p in range(6)]


def _state(n: int) -> bytes:
    isr = [1, 2, 3] if n % 3 else [1, 2]
    return (
        f'{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{n},"isr":{isr}}}'.encode()
    )


class Writer:
    """Changes the znodes round robin until stopped; a new znode now and then."""

    def __init__(self, client: KazooClient, root: str) -> None:
        self.client, self.root = client, root
        self.writes = 0
        self.created: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            self.client.set(self.root + PATHS[n % len(PATHS)], _state(n))
            if n % 97 == 0:
                path = f"/brokers/topics/t{n}/partitions/0/state"
                self.client.create(self.root + path, _state(0), makepath=True)
                self.created.append(path)
            self.writes = n
            time.sleep(0.01)  # ~100 changes a second: a busy cluster, not a storm

    def stop(self) -> dict[str, int | None]:
        self._stop.set()
        self._thread.join(30)
        return {p: self.client.exists(self.root + p).version for p in PATHS + self.created}


def _logged(event_log: Path) -> list[dict[str, Any]]:
    return list(read_records(event_log, lambda damage: None))


def _holds(event_log: Path, final: dict[str, int | None]) -> bool:
    last: dict[str, int] = {}
    for r in _logged(event_log):
        if r["after"] is not None:
            last[r["path"]] = r["after"]["version"]
    return all(last.get(p) == v for p, v in final.items())


def _wait_on_topic(topic: Any, logged: list[dict[str, Any]]) -> None:
    """Until every logged record is on the topic; then the topic read to its end (the daemons
    have stopped), so anything published twice is read too."""
    wanted = {r["seq"] for r in logged}

    def complete() -> bool:
        topic.poll()
        return wanted <= {r["seq"] for r in topic.records}

    wait_until(complete, 60, what="every logged record on the topic")
    topic.read_to_end()


def _more_writes(writer: Writer, count: int = 100) -> None:
    """Until the writer made `count` more changes: changes while a daemon is down, or after
    it came back (events, not a clock)."""
    mark = writer.writes
    wait_until(lambda: writer.writes >= mark + count, 30, 0.02, what=f"{count} more writes")


@contextmanager
def _watch_target(
    cluster: Any, zk_chroot: KazooClient
) -> Iterator[tuple[KazooClient, str, list[str]]]:
    yield zk_chroot, "", [cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1"]


@contextmanager
def _txnlog_target(tmp_path: Path) -> Iterator[tuple[KazooClient, str, list[str]]]:
    with zookeeper_server("kafka-3.8.4", tmp_path / "zk", snap_count=2000) as server:
        client = KazooClient(server.hosts)
        client.start(30)
        client.create("/kafka/cluster/id", b'{"version":"1","id":"faults"}', makepath=True)
        args = ["--source", "txnlog", "--zk-data-dir", str(server.data_dir)]
        try:
            yield client, "/kafka", [server.hosts + "/kafka", *args]
        finally:
            client.stop()
            client.close()


# A killed daemon holds its election lock until its ZooKeeper session ends: the tests' daemons
# take a short one (users' default: 10 s) so the restart does not wait long for it.
SESSION = ["--session-timeout-s", "4"]
# A failpoint fires at its Nth hit: a turn's steps are hit many times a second under the writer,
# a checkpoint every CHECKPOINT_S; each is reached a few turns (or checkpoints) in.
CHECKPOINT_S = "0.5"
NTH_HIT = {"checkpoint.tree": 3, "checkpoint.delivered": 3}

# (failpoint, action): each step of a turn, in the order a turn reaches them.
FAULTS = [
    ("tracker.record", "raise"),  # records made, state advanced, nothing logged
    ("event_log.write", "raise"),  # the log write fails (EIO)
    ("event_log.write", "enospc"),  # ... as on a full disk
    ("event_log.fsync", "raise"),  # written, the fsync fails
    ("event_log.fsync", "kill"),  # written, killed before the fsync
    ("kafka.produce", "kill"),  # logged, killed before the records reach the producer
    ("kafka.ack", "kill"),  # on Kafka, killed before the daemon notes the ack
    ("kafka.commit", "kill"),  # a transaction's records produced, killed before its commit
    ("kafka.committed", "kill"),  # committed, killed before the daemon notes it
    ("checkpoint.tree", "kill"),  # killed while the tree checkpoint replaces the last one
    ("checkpoint.delivered", "kill"),  # ... the delivered checkpoint
]


@pytest.mark.parametrize("mode", ["watch", "txnlog"])
@pytest.mark.parametrize(("point", "action"), FAULTS, ids=[f"{p}-{a}" for p, a in FAULTS])
def test_a_failed_turn_then_a_restart_loses_nothing(
    mode: str,
    point: str,
    action: str,
    cluster: Any,
    request: pytest.FixtureRequest,
    start_capture: Callable[..., Any],
    changes_topic: Any,
    tmp_path: Path,
) -> None:
    if mode == "watch":
        target = _watch_target(cluster, request.getfixturevalue("zk_chroot"))
    else:
        target = _txnlog_target(tmp_path)
    with target as (client, root, args):
        for path in PATHS:
            client.create(root + path, _state(0), makepath=True)
        event_log = tmp_path / "events"
        common: dict[str, Any] = {"state_dir": tmp_path / "state", "publish_to": changes_topic}
        args = [*args, "--event-log", str(event_log), "--heartbeat-s", "0.2", *SESSION]
        nth = NTH_HIT.get(point, 40)
        faulty = start_capture(
            *args,
            env={"ZKCDC_FAILPOINTS": f"{point}={nth}:{action}", "ZKCDC_CHECKPOINT_S": CHECKPOINT_S},
            **common,
        )
        writer = Writer(client, root)
        writer.start()
        code = faulty.process.wait(90)
        if action == "kill":
            assert code == -signal.SIGKILL, faulty.tail()
        else:
            assert code == 1, faulty.tail()
            assert "Traceback" not in faulty.tail() or point == "tracker.record", faulty.tail()
        _more_writes(writer)  # changes while no capture runs
        again = start_capture(*args, **common)
        again.wait_logged("in sync" if mode == "watch" else "capturing")
        _more_writes(writer)
        final = writer.stop()
        wait_until(lambda: _holds(event_log, final), 60, what="the log to hold every last version")
        assert again.stop() == 0, again.tail()
    logged = _logged(event_log)
    _wait_on_topic(changes_topic, logged)
    counts = account(logged, final)
    assert counts["versions_seen"] > len(PATHS), counts
    assert_each_once(changes_topic.records, logged)


@contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real small file system (root works on these machines): a real full disk."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, f"cannot mount a tmpfs (needs root): {mounted.stderr}"
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_stops_capture_with_one_line_and_once_freed_nothing_is_lost(
    cluster: Any,
    zk_chroot: KazooClient,
    start_capture: Callable[..., Any],
    changes_topic: Any,
    tmp_path: Path,
) -> None:
    big = os.urandom(20_000)  # two images a record, incompressible: 1 MiB fills in a few dozen
    for path in PATHS:
        zk_chroot.create(path, _state(0), makepath=True)
    with _tmpfs(tmp_path / "disk", "1m") as disk:
        args = [cluster.zookeeper_hosts + zk_chroot.chroot, "--cluster", "c1",
                "--event-log", str(disk / "events")]  # fmt: skip
        common: dict[str, Any] = {"state_dir": disk / "state", "publish_to": changes_topic}
        first = start_capture(*args, **common)
        first.wait_logged("in sync")
        writer = Writer(zk_chroot, "")
        writer.start()
        # Writes until capture stops on the full disk, not a fixed count: a watch reads the
        # newest image, so a capture a few turns behind logs 4 records a turn however many sets
        # went by (in CI, 2,000 sets were done before 1 MiB was logged). The bound is a bound.
        deadline, n = time.monotonic() + 180, 0
        while first.process.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"capture never hit the full disk ({n} sets):\n{first.tail()}")
            path = f"/big/{n % 4}"
            if zk_chroot.exists(path):
                zk_chroot.set(path, big)
            else:
                zk_chroot.create(path, big, makepath=True)
            n += 1
        assert first.process.wait(30) == 1
        lines = first.tail(200).splitlines()
        assert not any("Traceback" in line for line in lines), first.tail()
        assert "zkcdc: error: cannot write the event log" in lines[-1], lines[-1]
        assert "No space left on device" in lines[-1], lines[-1]

        # Freed: the same folder with room again, and capture started again.
        subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)
        again = start_capture(*args, **common)
        again.wait_logged("in sync")
        _more_writes(writer)
        final = writer.stop()
        final.update({f"/big/{i}": zk_chroot.exists(f"/big/{i}").version for i in range(4)})
        event_log = disk / "events"
        wait_until(lambda: _holds(event_log, final), 60, what="the log to hold every last version")
        assert again.stop() == 0, again.tail()
        logged = _logged(event_log)
    _wait_on_topic(changes_topic, logged)
    account(logged, final)
    assert_each_once(changes_topic.records, logged)


def test_an_active_daemon_stalled_past_its_session_steps_down_without_giving_out_a_record(
    cluster: Any,
    zk_chroot: KazooClient,
    start_capture: Callable[..., Any],
    changes_topic: Any,
    tmp_path: Path,
) -> None:
    """A frozen active (its session expired, the standby took over) that wakes up must give
    out nothing more: before the fence it logged and published a heartbeat at once, under a seq
    the new active had used. It steps down and campaigns again, as the standby now, without
    exiting. What it had in flight was in a transaction the new active's producer fenced: a
    read_committed consumer sees every seq once and every version once."""
    for path in PATHS:
        zk_chroot.create(path, _state(0), makepath=True)
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    args = [connect, "--cluster", "c1", "--session-timeout-s", "4", "--heartbeat-s", "0.2"]
    first = start_capture(*args, "--event-log", str(tmp_path / "a"), state_dir=tmp_path / "sa",
                          publish_to=changes_topic)  # fmt: skip
    first.wait_logged("in sync")
    second = start_capture(*args, "--event-log", str(tmp_path / "b"), state_dir=tmp_path / "sb",
                           publish_to=changes_topic)  # fmt: skip
    second.wait_logged("standby")
    writer = Writer(zk_chroot, "")
    writer.start()
    _more_writes(writer, 300)  # the active busy, records in flight
    first.process.send_signal(signal.SIGSTOP)  # frozen: its session expires, the standby takes over
    second.wait_logged("capturing", timeout_s=60)
    _more_writes(writer, 300)  # the new active at work before the old one wakes
    resumed_ms = int(time.time() * 1000)
    first.process.send_signal(signal.SIGCONT)  # back, with a heartbeat due at once
    first.wait_logged("stepped down")  # it asked before giving out: its lock node was gone
    first.wait_logged("standby")  # campaigning again, behind the new active
    assert first.process.poll() is None, first.tail()
    _more_writes(writer)
    final = writer.stop()

    def new_active_caught_up() -> bool:
        last = {r["path"]: r["after"]["version"] for r in _logged(tmp_path / "b") if r["after"]}
        return all(last.get(p, v) == v for p, v in final.items()) and bool(last)

    wait_until(new_active_caught_up, 60, what="the new active to record the last versions")
    assert second.stop() == 0, second.tail()
    assert first.stop() == 0, first.tail()
    new_log = _logged(tmp_path / "b")
    _wait_on_topic(changes_topic, new_log)

    old_log = _logged(tmp_path / "a")
    went_on = [(r["seq"], r["op"], r["captured_ms"] - resumed_ms) for r in old_log
               if r["captured_ms"] >= resumed_ms]  # fmt: skip
    assert not went_on, f"the frozen daemon went on: {went_on[:5]}\n{first.tail(30)}"
    took_over = min(r["seq"] for r in new_log) - 1
    ours = {r["seq"]: r for r in new_log}
    # The new active's own records: contiguous, each once on the topic.
    seqs = sorted(ours)
    assert seqs == list(range(took_over + 1, took_over + 1 + len(seqs)))
    changes_topic.read_to_end()
    on_topic = changes_topic.records
    assert all(ours[r["seq"]] == r for r in on_topic if r["seq"] > took_over), "not the new one's"
    twice = [seq for seq, n in Counter(r["seq"] for r in on_topic).items() if n > 1]
    assert not twice, f"seqs twice on the topic: {sorted(twice)[:20]}"
    versions = Counter((r["path"], r["after"]["czxid"], r["after"]["version"]) for r in on_topic
                       if r["op"] in ("CREATE", "UPDATE"))  # fmt: skip
    assert not [v for v, n in versions.items() if n > 1], "a version twice on the topic"
    assert sorted(r["seq"] for r in on_topic) == list(range(1, len(on_topic) + 1))


def test_an_active_whose_producer_is_lost_keeps_its_lock_and_sends_what_it_logged(
    cluster: Any,
    zk_chroot: KazooClient,
    start_capture: Callable[..., Any],
    changes_topic: Any,
    tmp_path: Path,
) -> None:
    """A producer librdkafka declared lost (after every broker restarted, B6) ends the term, not
    the lock: the active fences it with a new producer and sends on from its own event log. Had
    it stepped down, the standby would take over and re-walk the tree, and what the active had
    logged (a whole broker outage's changes) would reach the topic only as skipped versions."""
    for path in PATHS:
        zk_chroot.create(path, _state(0), makepath=True)
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    args = [connect, "--cluster", "c1", "--heartbeat-s", "0.2", *SESSION]
    active = start_capture(*args, "--event-log", str(tmp_path / "a"), state_dir=tmp_path / "sa",
                           publish_to=changes_topic,
                           env={"ZKCDC_FAILPOINTS": "kafka.commit=30:lose"})  # fmt: skip
    active.wait_logged("in sync")
    standby = start_capture(*args, "--event-log", str(tmp_path / "b"), state_dir=tmp_path / "sb",
                            publish_to=changes_topic)  # fmt: skip
    standby.wait_logged("standby")
    writer = Writer(zk_chroot, "")
    writer.start()
    active.wait_logged("the producer is lost")
    _more_writes(writer)
    final = writer.stop()
    wait_until(lambda: _holds(tmp_path / "a", final), 60, what="the active to record the last")
    lost = [line for line in active.log_lines() if line.get("event") == "the producer is lost"]
    assert lost and lost[0].get("then") == "capturing again with a new one, still active", lost
    assert not standby.logged("capturing"), "the standby took over"
    assert standby.stop() == 0 and active.stop() == 0, active.tail()
    logged = _logged(tmp_path / "a")
    _wait_on_topic(changes_topic, logged)
    counts = account(logged, final)
    assert counts["versions_seen"] > len(PATHS), counts
    assert_each_once(changes_topic.records, logged)
