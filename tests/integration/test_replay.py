"""`zkcdc replay` on the real stack: a staged incident captured while the live alert job runs;
the log replayed through the rules gives the live job's alerts; replayed into Kafka at two
speeds it gives the same records, and them again; a live job that warmed up first gives them
too; a replay killed midway resumes without sending anything twice; a damaged copy replays
its valid part and names the damage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from alerts_harness import Alerts, alerts_of, job_read_to
from capture_harness import ChangesTopic, TopicReader
from confluent_kafka import Producer
from conftest import wait_until
from kazoo.client import KazooClient
from simulate_harness import build_cluster, simulate

from zkcdc.capture.delivery.event_log import log_files
from zkcdc.ground import waiting

pytestmark = pytest.mark.integration

RULES = ["--rule", "broker_down_for_ms=1000", "--rule", "under_replicated_for_ms=1000"]


def zkcdc(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkcdc", *args], capture_output=True, text=True,
                          timeout=timeout_s)  # fmt: skip


def job_over_topic(
    bootstrap: str, topic: str, work: Path, *flags: str, timeout_s: float = 600,
    lines: list[dict[str, Any]] | None = None,
) -> Alerts:  # fmt: skip
    """The alerts of a bounded job over the topic; `lines`: given, the job's log lines."""
    out = work / f"{topic}.jsonl"
    job = zkcdc("stream", "alerts", "--bootstrap-servers", bootstrap, "--topic", topic,
                "--no-publish", "--alerts-out", str(out), "--available-now",
                "--checkpoint", str(work / f"{topic}-checkpoint"), *RULES, *flags,
                timeout_s=timeout_s)  # fmt: skip
    assert job.returncode == 0, job.stderr[-3000:]
    if lines is not None:
        lines += [json.loads(line) for line in job.stderr.splitlines() if line.startswith("{")]
    return alerts_of(out)


@pytest.fixture(scope="module")
def incident(shared_cluster, tmp_path_factory) -> dict[str, Any]:
    """A broker failure and a controller failover on a simulated cluster, captured into an event
    log and the changes topic while the live alert job runs."""
    cluster = shared_cluster
    work = tmp_path_factory.mktemp("replay")
    chroot = f"/zkcdc-tests/replay-{uuid.uuid4().hex[:8]}"  # the module's own
    root = KazooClient(hosts=cluster.zookeeper_hosts)
    root.start(30)
    root.ensure_path(chroot)
    connect = cluster.zookeeper_hosts + chroot
    build_cluster(connect)
    changes = ChangesTopic(cluster.bootstrap_servers, f"zkcdc.changes.replay-{os.getpid()}")
    log = work / "events"
    capture = subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "capture", "--zookeeper", connect, "--cluster", "rp",
         "--bootstrap-servers", cluster.bootstrap_servers, "--topic", changes.topic,
         "--event-log", str(log), "--state-dir", str(work / "state"),
         "--ha-path", f"/zkcdc-tests/ha-replay-{os.getpid()}"],
        stdout=(work / "capture.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    live_out = work / "live.jsonl"
    live = subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "stream", "alerts", "--bootstrap-servers",
         cluster.bootstrap_servers, "--topic", changes.topic, "--no-publish",
         "--alerts-out", str(live_out), "--checkpoint", str(work / "live-checkpoint"),
         "--shards", "0", *RULES],
        stdout=(work / "live.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        changes.wait_for(lambda r: r["op"] == "READ", "the snapshot")
        failure = simulate("run", "broker-failure", "--zookeeper", connect, "--broker", "3",
                           "--hold", "3")  # fmt: skip
        assert failure.returncode == 0, failure.stderr
        failover = simulate("run", "controller-failover", "--zookeeper", connect, "--hold", "2")
        assert failover.returncode == 0, failover.stderr
        # The run's end: its brokers' sessions closed, each broker's deletion captured.
        changes.wait_for(lambda r: r["path"] == "/controller_epoch", "the failover")
        wait_until(lambda: _brokers_gone(root, chroot, changes), 60, what="every broker gone")
        capture.send_signal(signal.SIGTERM)
        assert capture.wait(60) == 0, (work / "capture.log").read_text()[-3000:]
        # The live job drains the last records (a committed batch up to the topic's end).
        ends = changes.ends()
        # Generous: on a slow day with the suite's four workers, a live job's start and first
        # micro-batch took over two minutes.
        waiting.wait_until(
            lambda: job_read_to(work / "live-checkpoint", changes.topic, ends), 300,
            what="the live job to read the topic to its end", interval_s=0.5,
            abandon=lambda: None if live.poll() is None else f"it exited {live.returncode}",
            detail=lambda: (work / "live.log").read_text()[-3000:],
        )  # fmt: skip
        assert any(
            a[1] == "FIRING" and ":controller_failover:" in a[0] for a in alerts_of(live_out)
        )
    finally:
        for process in (capture, live):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        live.wait(120)
        capture.wait(60)
        changes.close()
        root.delete(chroot, recursive=True)
        root.stop()
        root.close()
    return {"log": log, "live": alerts_of(live_out), "work": work,
            "bootstrap": cluster.bootstrap_servers, "topic": changes.topic}  # fmt: skip


def _brokers_gone(root: KazooClient, chroot: str, changes: ChangesTopic) -> bool:
    if root.get_children(f"{chroot}/brokers/ids"):
        return False
    changes.poll()
    last = {r["path"]: r["op"] for r in changes.records if r["path"].startswith("/brokers/ids/")}
    return bool(last) and all(op == "DELETE" for op in last.values())


@pytest.fixture(scope="module")
def replayed(incident, tmp_path_factory) -> Path:
    """The log replayed through the rules once (alerts and state files), for the tests that
    read what it wrote."""
    out = tmp_path_factory.mktemp("replayed")
    run = zkcdc("replay", str(incident["log"]), "--alerts-out", str(out / "alerts.jsonl"),
                "--state-out", str(out / "state.jsonl"), *RULES)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def replayed_at_speed_0(incident, tmp_path_factory) -> tuple[str, Path]:
    """The log replayed into Kafka at full speed once: (its topic, the replay's folder)."""
    out = tmp_path_factory.mktemp("replayed-into-kafka")
    topic = f"zkcdc.replayed.{uuid.uuid4().hex[:8]}.speed0"
    run = zkcdc("replay", str(incident["log"]), "--bootstrap-servers", incident["bootstrap"],
                "--topic", topic, "--speed", "0", "--checkpoint", str(out / "replay.json"))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return topic, out


def _world_readable(folder: Path, skip: set[str]) -> list[str]:
    return [f"{oct(p.stat().st_mode & 0o777)} {p}" for p in folder.rglob("*")
            if p.name not in skip and p.stat().st_mode & 0o007]  # fmt: skip


def test_no_file_or_folder_zkcdc_writes_is_open_to_other_users(
    incident, replayed, replayed_at_speed_0
):
    """Event log, tree.avro, checkpoints (capture's and Spark's), alert and state files, the
    replay checkpoint: none readable by others, though the test's own umask is 022."""
    _, into_kafka = replayed_at_speed_0
    work = incident["work"]
    written = [work / "events", work / "state", work / "live-checkpoint", work / "live.jsonl"]
    assert all(p.exists() for p in written) and (into_kafka / "replay.json").exists()
    assert (replayed / "alerts.jsonl").exists() and (replayed / "state.jsonl").exists()
    assert len(list(work.rglob("*.avro"))) >= 2  # the event log and tree.avro at least
    # capture.log and live.log are the test's own (its stdout redirections).
    assert _world_readable(work, {"capture.log", "live.log"}) == []
    assert _world_readable(replayed, set()) == []
    assert _world_readable(into_kafka, set()) == []


def test_replaying_the_log_through_the_rules_gives_the_live_jobs_alerts(incident, replayed):
    out, state = replayed / "alerts.jsonl", replayed / "state.jsonl"
    replayed = alerts_of(out)
    assert {a[0].split(":")[1] for a in replayed} >= {"broker_down", "controller_failover"}
    assert replayed == incident["live"]
    entities = {json.loads(line)["kind"] for line in state.read_text().splitlines()}
    assert entities >= {"broker", "controller", "partition", "topic"}


# One record a micro-batch is a micro-batch for each of the incident's records: up to ~9
# minutes on a loaded machine, near the suite's 10-minute default.
# One record and forty: the extreme, and batches that end mid-way through a turn's records;
# every batching between them is the pure property's (tests/unit/streaming/test_seq_order.py).
@pytest.mark.parametrize("batch", [pytest.param(1, marks=pytest.mark.timeout(1500)), 40])
def test_a_backlog_read_in_tiny_micro_batches_gives_the_replays_alerts(
    incident, replayed, batch, tmp_path
):
    """The incident's changes topic read as a backlog, at most `batch` records a micro-batch:
    Spark's Kafka source then advances the topic's six partitions unevenly, a later seq often
    read before an earlier one of another partition. The job's order waits for each
    (streaming/rules/seq_order.py), so the alerts are the replay's of the event log, line for
    line (as multisets). Every batching down to one record a partition, with restarts between
    batches, is also the pure property of tests/unit/streaming/test_seq_order.py; here Spark's
    own source does the reading.

    Each micro-batch's line says how far behind the topic's end it left the job, in offsets
    (capture's commit markers among them): at most what the batch before it said less the
    batch's own records, down to at most a partition's last commit marker each
    (streaming/job/catch_up.py)."""
    lines: list[dict[str, Any]] = []
    alerts = job_over_topic(
        incident["bootstrap"], incident["topic"], tmp_path, "--max-records-per-batch", str(batch),
        timeout_s=1400 if batch == 1 else 600, lines=lines,
    )  # fmt: skip
    ends = ChangesTopic(incident["bootstrap"], incident["topic"])
    try:
        partitions = ends.ends()
    finally:
        ends.close()
    held = sum(partitions.values())
    batches = [
        (b["records"], b["records_behind"]) for b in lines if b.get("event") == "micro-batch"
    ]
    assert len(batches) > 1 and batches[-1][1] <= len(partitions), batches
    behind = held
    for records, said in batches:
        assert 0 <= said <= behind - records, batches
        behind = said
    expected = alerts_of(replayed / "alerts.jsonl")
    assert {a[0].split(":")[1] for a in expected} >= {"broker_down", "controller_failover"}
    assert alerts == expected, (
        f"only in the job: {sorted(alerts - expected)[:5]}; "
        f"only in the replay: {sorted(expected - alerts)[:5]}"
    )


def test_a_live_job_that_warmed_up_over_the_topic_gives_the_replays_alerts_once(
    incident, replayed, tmp_path
):
    """A live job (not available-now) first runs its warm-up's micro-batches over the topic's
    first records (streaming/job/warm_up.py), their alerts dropped, then reads the topic from
    its own checkpoint: its alerts are the replay's, none twice, none lost, and the warm-up's
    checkpoint is gone."""
    out, checkpoint, log = tmp_path / "live.jsonl", tmp_path / "checkpoint", tmp_path / "job.log"
    job = subprocess.Popen(
        [sys.executable, "-m", "zkcdc", "stream", "alerts", "--bootstrap-servers",
         incident["bootstrap"], "--topic", incident["topic"], "--no-publish",
         "--alerts-out", str(out), "--checkpoint", str(checkpoint),
         "--warm-up-batches", "10", *RULES],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        ends = ChangesTopic(incident["bootstrap"], incident["topic"])
        try:
            at_end = ends.ends()
        finally:
            ends.close()
        waiting.wait_until(
            lambda: job_read_to(checkpoint, incident["topic"], at_end), 600,
            what="the live job to read the topic to its end", interval_s=0.5,
            abandon=lambda: None if job.poll() is None else f"it exited {job.returncode}",
            detail=lambda: log.read_text()[-3000:],
        )  # fmt: skip
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0, log.read_text()[-3000:]
    warmed = [json.loads(line) for line in log.read_text().splitlines()
              if '"warmed up"' in line]  # fmt: skip
    # Ten, or fewer where a loaded machine made it run past its time limit.
    assert len(warmed) == 1 and 0 < warmed[0]["micro_batches"] <= 10, log.read_text()[-3000:]
    assert not (checkpoint / "warm-up").exists()
    # The sharded stage asks its state for buckets not yet written: no WARN line for each.
    assert "doesn't contain key" not in log.read_text()
    expected = alerts_of(replayed / "alerts.jsonl")
    alerts = alerts_of(out)
    assert alerts == expected, (
        f"only in the job: {sorted(alerts - expected)[:5]}; "
        f"only in the replay: {sorted(expected - alerts)[:5]}"
    )


class RawTopic(TopicReader):
    """A topic's messages as they are, partition by partition, in offset order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.partitions: dict[int, list[tuple[Any, ...]]] = {}

    def take(self, message: Any) -> None:
        kept = (message.key(), message.value(), message.headers(), message.timestamp())
        self.partitions.setdefault(message.partition(), []).append(kept)


def raw_records(bootstrap: str, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    reader = RawTopic(bootstrap, topic)
    try:
        reader.read_to_end()
    finally:
        reader.close()
    return reader.partitions


def test_replays_into_kafka_at_speed_0_and_10_give_the_same_records_and_the_live_alerts(
    incident, cluster, replayed_at_speed_0, tmp_path
):
    """The alert job reads a topic's keys, values and headers alone, in each partition's
    order (not Kafka's timestamps, not when a record came): two topics equal in those give it
    the same alerts. So the speed-10 topic is compared with the speed-0 one record for record
    (timestamps too), and one job over them proves the alerts are the live job's: a job with
    its state by entity over two tasks (`--shards 2`), where the live one ran as one group, so
    live against replay holds across the two layouts too."""
    topic = f"zkcdc.replayed.{uuid.uuid4().hex[:8]}.speed10"
    run = zkcdc("replay", str(incident["log"]), "--bootstrap-servers", cluster.bootstrap_servers,
                "--topic", topic, "--speed", "10", "--checkpoint", str(tmp_path / "10.json"))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    at_speed_0 = raw_records(cluster.bootstrap_servers, replayed_at_speed_0[0])
    at_speed_10 = raw_records(cluster.bootstrap_servers, topic)
    assert at_speed_0, "the speed-0 replay's topic is empty"
    assert at_speed_10 == at_speed_0, _first_difference(at_speed_0, at_speed_10)
    alerts = job_over_topic(
        cluster.bootstrap_servers, replayed_at_speed_0[0], tmp_path, "--shards", "2"
    )
    assert alerts == incident["live"]


def test_a_killed_replay_resumes_without_sending_a_record_twice(incident, cluster, tmp_path):
    topic = f"zkcdc.replayed.{uuid.uuid4().hex[:8]}.resumed"
    checkpoint = str(tmp_path / "resume.json")
    args = [sys.executable, "-m", "zkcdc", "replay", str(incident["log"]), "--bootstrap-servers",
            cluster.bootstrap_servers, "--topic", topic, "--checkpoint", checkpoint]  # fmt: skip
    expected = sum(1 for _ in _log_records(incident["log"]))
    first = subprocess.Popen([*args, "--speed", "1"], stderr=subprocess.DEVNULL)
    # Killed midway: once some records are on the topic (at speed 1 the rest take seconds).
    sent = ChangesTopic(cluster.bootstrap_servers, topic)
    try:
        wait_until(lambda: _polled(sent), 60, what="the first replayed records")
    finally:
        first.kill()
        first.wait()
    sent.read_to_end()
    assert 0 < len(sent.records) < expected, "the replay was not killed midway"
    sent.close()
    second = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "sent before" in second.stderr
    again = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "replayed into" in again.stderr

    on_topic = ChangesTopic(cluster.bootstrap_servers, topic)
    on_topic.read_to_end()  # every replay stopped: anything sent twice is read too
    seqs = [r["seq"] for r in on_topic.records]
    on_topic.close()
    assert sorted(seqs) == sorted({r["seq"] for r in _log_records(incident["log"])})


def test_a_damaged_copy_replays_its_valid_records_and_reports_the_damage(incident, tmp_path):
    copy = tmp_path / "damaged"
    copy.mkdir()
    files = log_files(incident["log"])
    for file in files:
        (copy / file.name).write_bytes(file.read_bytes())
    victim = max((copy / f.name for f in files), key=lambda f: f.stat().st_size)
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2] + data[len(data) // 2 + 100 :])
    out = tmp_path / "alerts.jsonl"
    run = zkcdc("replay", str(copy), "--alerts-out", str(out), *RULES)
    assert run.returncode == 1
    assert f"{victim}: damaged at block" in run.stderr and "Traceback" not in run.stderr
    assert "alerts written" in run.stderr
    assert out.exists()


def _polled(topic: ChangesTopic) -> bool:
    topic.poll(100)
    return bool(topic.records)


def _log_records(log: Path) -> list[dict[str, Any]]:
    from zkcdc.capture.delivery.event_log import read_records

    return list(read_records(log))


def _first_difference(a: dict[int, list[Any]], b: dict[int, list[Any]]) -> str:
    """Where two topics' records part: the partition, the offset and the two records."""
    for p in sorted(set(a) | set(b)):
        left, right = a.get(p, []), b.get(p, [])
        for i, (x, y) in enumerate(zip(left, right, strict=False)):
            if x != y:
                return f"partition {p} record {i}: {x!r} != {y!r}"
        if len(left) != len(right):
            return f"partition {p}: {len(left)} records against {len(right)}"
    return "no difference"


def test_a_job_that_takes_its_backlog_whole_gives_the_replays_alerts_once_through_a_kill(
    incident, replayed, new_topic, tmp_path
):
    """A new checkpoint far behind takes its backlog whole before its query starts
    (streaming/job/initial_state.py), and its shards go on from it. The incident's messages,
    copied as they are: the first half of each partition before the job starts (a cut across
    the partitions, so records of the backlog wait there for their turn), the rest once it
    runs. The first job is killed as soon as it says the backlog is taken (its rows written,
    their delivery not begun or under way); the next start delivers them, starts its query
    from the backlog's end with its shards' entries, and reads the rest: the alerts are the
    replay's, none twice, none lost, the backlog taken once. Before them, a job stopped
    (SIGTERM) as it begins its take exits 0 at once, its batch query cancelled, nothing taken."""
    messages = raw_records(incident["bootstrap"], incident["topic"])
    topic = new_topic(partitions=len(messages))
    producer = Producer({"bootstrap.servers": incident["bootstrap"]})

    def copy(half: int) -> None:
        for partition, kept in messages.items():
            middle = len(kept) // 2
            for key, value, headers, _ in kept[:middle] if half == 0 else kept[middle:]:
                producer.produce(topic, value=value, key=key, headers=headers,
                                 partition=partition)  # fmt: skip
        assert producer.flush(30) == 0

    copy(0)
    out, checkpoint = tmp_path / "alerts.jsonl", tmp_path / "checkpoint"
    args = [sys.executable, "-m", "zkcdc", "stream", "alerts", "--bootstrap-servers",
            incident["bootstrap"], "--topic", topic, "--no-publish", "--alerts-out", str(out),
            "--checkpoint", str(checkpoint), "--shards", "2", "--take-backlog-at", "1", *RULES]  # fmt: skip
    stopped_log = tmp_path / "stopped.log"
    stopped = subprocess.Popen(args, stdout=stopped_log.open("wb"), stderr=subprocess.STDOUT)
    marker = checkpoint / "initial-state" / "taken.json"
    try:
        # Written as the take begins, before its batch query: a just-started driver takes
        # seconds over that query, so the stop comes in the middle of it.
        waiting.wait_until(
            marker.exists, 300, what="the job to begin its take", interval_s=0.05,
            abandon=lambda: None if stopped.poll() is None else f"it exited {stopped.returncode}",
            detail=lambda: stopped_log.read_text()[-3000:],
        )  # fmt: skip
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(30) == 0, stopped_log.read_text()[-3000:]
    finally:
        if stopped.poll() is None:
            stopped.kill()
            stopped.wait(60)
    said = stopped_log.read_text()
    assert "stopped while taking the backlog" in said and '"backlog taken"' not in said, said
    assert "resolves to a loopback address" not in said  # a local driver binds to loopback
    assert not json.loads(marker.read_text())["rows_written"]
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    first = subprocess.Popen(args, stdout=logs[0].open("wb"), stderr=subprocess.STDOUT)
    try:
        waiting.wait_until(
            lambda: '"backlog taken"' in logs[0].read_text(), 300,
            what="the first job to take its backlog", interval_s=0.05,
            abandon=lambda: None if first.poll() is None else f"it exited {first.returncode}",
            detail=lambda: logs[0].read_text()[-3000:],
        )  # fmt: skip
    finally:
        first.kill()
        first.wait(60)
    second = subprocess.Popen(args, stdout=logs[1].open("wb"), stderr=subprocess.STDOUT)
    try:
        copy(1)
        ends = ChangesTopic(incident["bootstrap"], topic)
        try:
            at_end = ends.ends()
        finally:
            ends.close()
        waiting.wait_until(
            lambda: job_read_to(checkpoint, topic, at_end), 600,
            what="the second job to read the topic to its end", interval_s=0.5,
            abandon=lambda: None if second.poll() is None else f"it exited {second.returncode}",
            detail=lambda: logs[1].read_text()[-3000:],
        )  # fmt: skip
    finally:
        if second.poll() is None:
            second.send_signal(signal.SIGTERM)
        assert second.wait(120) == 0, logs[1].read_text()[-3000:]
    said = [log.read_text() for log in logs]
    assert '"taking the backlog whole' in said[0] and "taking the backlog" not in said[1]
    assert (checkpoint / "initial-state" / "taken.json").exists()
    expected = alerts_of(replayed / "alerts.jsonl")
    alerts = alerts_of(out)
    assert alerts == expected, (
        f"only in the job: {sorted(alerts - expected)[:5]}; "
        f"only in the replay: {sorted(expected - alerts)[:5]}"
    )
