"""`zkcdc capture --source txnlog` as users run it, beside a real ZooKeeper server: every version
of every write with its zxid, through kill -9 and restart without a gap or a duplicate."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from capture_harness import changes
from conftest import wait_until
from kafka_tree import controller_id, full_isr, partition_state, restart_broker
from kazoo.client import KazooClient
from zookeeper_servers import zookeeper_server

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.ground import waiting
from zkcdc.ground.change_types import EventType

pytestmark = pytest.mark.integration


def _state(n: int) -> bytes:
    isr = [1, 2, 3] if n % 2 else [1, 2]
    return (
        f'{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{n},"isr":{isr}}}'.encode()
    )


def _both_modes(start_capture, connect, data_dir, tmp_path):
    """A txnlog capture and a watch capture of the same chroot, each with an event log."""
    txnlog_log, watch_log = tmp_path / "txnlog-events", tmp_path / "watch-events"
    txnlog = start_capture(connect, "--source", "txnlog", "--zk-data-dir", str(data_dir),
                           "--event-log", str(txnlog_log))  # fmt: skip
    watch = start_capture(connect, "--event-log", str(watch_log))
    txnlog.wait_logged("capturing")
    watch.wait_logged("in sync")
    return txnlog, watch, txnlog_log, watch_log


def _caught_up(log, client, paths):
    """Whether the event log's last record of each path says what ZooKeeper holds now (its
    version, or gone): a capture has recorded up to this moment."""
    last = {}
    for r in read_records(log, lambda damage: None):
        if r["path"] in paths:
            last[r["path"]] = None if r["after"] is None else r["after"]["version"]
    now = {}
    for path in paths:
        stat = client.exists(path)
        now[path] = None if stat is None else stat.version
    return all(last.get(p) == v for p, v in now.items())


def _live(records):
    return [r for r in records if r["op"] in ("CREATE", "UPDATE", "DELETE")]


def test_kill_9_and_restart_give_every_transaction_once_in_zxid_order(
    start_capture, changes_topic, tmp_path
):
    with zookeeper_server("kafka-3.8.4", tmp_path / "zk", snap_count=400) as server:
        client = KazooClient(server.hosts)
        client.start(30)
        partitions = 20
        for p in range(partitions):
            client.create(f"/kafka/brokers/topics/t/partitions/{p}/state", _state(0), makepath=True)
        client.create("/kafka/cluster/id", b'{"version":"1","id":"txn-kill"}', makepath=True)
        args = ["--source", "txnlog", "--zk-data-dir", str(server.data_dir), "--heartbeat-s", "0.2"]
        state = tmp_path / "state"
        event_log = tmp_path / "events"
        common = dict(state_dir=state, publish_to=changes_topic)
        first = start_capture(
            server.hosts + "/kafka", *args, "--event-log", str(event_log), **common
        )
        first.wait_logged("capturing")

        writes = 3_000
        progress = [0]
        stop = threading.Event()

        def write() -> None:
            for n in range(1, writes + 1):
                client.set(f"/kafka/brokers/topics/t/partitions/{n % partitions}/state", _state(n))
                progress[0] = n
            stop.set()

        writer = threading.Thread(target=write)
        writer.start()
        while progress[0] < writes // 3:
            time.sleep(0.01)
        first.stop(signal.SIGKILL)  # mid-storm
        while progress[0] < writes * 2 // 3:
            time.sleep(0.01)  # written while no capture runs, across log roll-overs
        second = start_capture(
            server.hosts + "/kafka", *args, "--event-log", str(event_log), **common
        )
        second.wait_logged("capturing")
        writer.join(120)
        assert stop.is_set()
        last_zxid = max(
            client.exists(f"/kafka/brokers/topics/t/partitions/{p}/state").mzxid
            for p in range(partitions)
        )

        def reached() -> bool:
            changes_topic.poll()
            got = [r["zxid"] for r in _live(changes_topic.records)]
            return bool(got) and max(got) >= last_zxid

        waiting.wait_until(reached, 120, what=f"the topic to reach zxid {last_zxid}", interval_s=0)
        assert second.stop() == 0
        changes_topic.read_to_end()  # stopped: anything sent twice is read too
        client.stop()

    assert not second.logged("snapshot read"), "the restart read a snapshot: it lost its place"
    for name, records in (
        ("event log", list(read_records(event_log, lambda damage: None))),
        ("topic", sorted(changes_topic.records, key=lambda r: r["seq"])),  # keyed by path
    ):
        live = _live(records)
        zxids = [r["zxid"] for r in live]
        assert zxids == sorted(zxids), f"{name}: not in zxid order"
        versions = changes(live)
        assert len(versions) == len(set(versions)), f"{name}: a version appeared twice"
        updates = [(p, v) for p, v in versions if v > 0]
        expected = {
            (f"/brokers/topics/t/partitions/{p}/state", v)
            for p in range(partitions)
            for v in range(1, writes // partitions + 1)
        }
        assert set(updates) == expected, f"{name}: {len(expected - set(updates))} versions missing"
        assert all(r["versions_skipped"] == 0 and r["source"]["mode"] == "txnlog" for r in records)


def test_in_a_write_storm_txnlog_mode_records_every_version_while_watch_mode_counts_its_skips(
    cluster, zk_chroot, start_capture, tmp_path
):
    """Watch and txnlog modes on the same storm, in the same run."""
    partitions = 20
    paths = [f"/brokers/topics/storm/partitions/{p}/state" for p in range(partitions)]
    for path in paths:
        zk_chroot.create(path, _state(0), makepath=True)
    zk_chroot.create("/cluster/id", b'{"version":"1","id":"storm"}', makepath=True)
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    data_dir = cluster.zookeeper_txnlog_dir().parent
    txnlog, watch, txnlog_log, watch_log = _both_modes(start_capture, connect, data_dir, tmp_path)

    writes, window = 4_000, threading.Semaphore(200)
    answered: list[int] = []
    for n in range(1, writes + 1):
        window.acquire()
        result = zk_chroot.set_async(paths[n % partitions], _state(n))
        result.rawlink(lambda r: (answered.append(1), window.release()))
    while len(answered) < writes:
        time.sleep(0.01)
    wait_until(lambda: all(_caught_up(log, zk_chroot, paths) for log in (txnlog_log, watch_log)),
               what="both captures caught up")  # fmt: skip
    assert txnlog.stop() == 0 and watch.stop() == 0

    def updates(log):
        records = [r for r in read_records(log, lambda d: None) if r["path"] in paths]
        return [r for r in records if r["op"] == "UPDATE"]

    exact, watched = updates(txnlog_log), updates(watch_log)
    assert len(exact) == writes, "txnlog mode: one UPDATE per committed write"
    assert [r["zxid"] for r in exact] == sorted(r["zxid"] for r in exact)
    assert all(r["versions_skipped"] == 0 for r in exact)
    for path in paths:
        versions = [r["after"]["version"] for r in exact if r["path"] == path]
        assert versions == list(range(1, writes // partitions + 1)), path
    skipped = sum(r["versions_skipped"] for r in watched)
    assert len(watched) + skipped == writes, "watch mode: every version seen or counted skipped"
    print(f"watch mode saw {len(watched)} of {writes} versions and reported {skipped} skipped")


def _versions(records):
    """(path, czxid, version) -> the record that made that version (the last one, if several)."""
    return {
        (r["path"], r["after"]["czxid"], r["after"]["version"]): r
        for r in records
        if r["op"] in ("READ", "CREATE", "UPDATE") and r["after"] is not None
    }


@pytest.mark.stops_brokers
def test_a_staged_kafka_incident_gives_the_watch_events_plus_what_watch_skipped_and_its_alerts(
    cluster, kafka_zk, new_topic, start_capture, tmp_path
):
    """Broker stop, controller failover and a reassignment on
    real Kafka, captured by both modes at once; then a copy of ZooKeeper's data dir, replayed
    through the alert rules with --from-txnlog, gives the incident's alerts."""
    connect = cluster.zookeeper_hosts + cluster.chroot
    data_dir = cluster.zookeeper_txnlog_dir().parent
    txnlog, watch, txnlog_log, watch_log = _both_modes(start_capture, connect, data_dir, tmp_path)
    began_ms = int(time.time() * 1000)

    topic = new_topic(partitions=2, replication_factor=3)
    before = full_isr(kafka_zk, topic, 0, 3)
    follower = next(b for b in before["isr"] if b != before["leader"])
    cluster.stop_broker(follower, signal.SIGTERM)
    try:
        wait_until(
            lambda: (
                follower not in (partition_state(kafka_zk, topic, 0) or {"isr": [follower]})["isr"]
            ),
            what=f"broker {follower} out of the ISR",
        )
        time.sleep(2)  # fixed wait: down long enough for the broker_down rule (1 s here)
    finally:
        restart_broker(cluster, kafka_zk, follower)
    old_controller = wait_until(lambda: controller_id(kafka_zk), what="a controller")
    cluster.stop_broker(old_controller, signal.SIGTERM)
    try:
        wait_until(
            lambda: controller_id(kafka_zk) not in (None, old_controller), what="a new controller"
        )
    finally:
        restart_broker(cluster, kafka_zk, old_controller)
    moving = new_topic(partitions=1, replication_factor=2)
    replicas = full_isr(kafka_zk, moving, 0, 2)["isr"]
    spare = next(b for b in cluster.broker_ids if b not in replicas)
    plan = tmp_path / "reassign.json"
    entry = {"topic": moving, "partition": 0, "replicas": [replicas[0], spare]}
    plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    cluster.kafka_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                       "--bootstrap-server", cluster.bootstrap_servers,
                       "--reassignment-json-file", str(plan), "--execute")  # fmt: skip
    wait_until(
        lambda: (
            not kafka_zk.exists("/admin/reassign_partitions")
            and sorted((partition_state(kafka_zk, moving, 0) or {"isr": []})["isr"])
            == sorted([replicas[0], spare])
        ),
        timeout_s=90,
        what="the reassignment to complete",
    )
    settled = ["/admin/reassign_partitions", f"/brokers/topics/{moving}/partitions/0/state",
               f"/brokers/topics/{moving}", "/controller_epoch"]  # fmt: skip
    wait_until(lambda: all(_caught_up(log, kafka_zk, settled) for log in (txnlog_log, watch_log)),
               what="both captures caught up")  # fmt: skip
    assert txnlog.stop() == 0 and watch.stop() == 0

    exact_records = list(read_records(txnlog_log, lambda d: None))
    watched = [
        r
        for r in read_records(watch_log, lambda d: None)
        if r["op"] in ("CREATE", "UPDATE", "DELETE")
    ]
    exact = _versions(exact_records)
    types = {t for r in watched for t in (e["type"] for e in r["events"])}
    # Txnlog mode tails the log and is stopped first: a change Kafka made after the settled
    # paths (a rejoined broker back in an __consumer_offsets ISR) may reach only watch mode.
    # Below txnlog mode's newest zxid, every watched change must be there too.
    newest = max(r["zxid"] or 0 for r in exact_records)
    watched = [r for r in watched if r["zxid"] is None or r["zxid"] <= newest]
    assert types >= {EventType.ISR_SHRUNK, EventType.ISR_EXPANDED, EventType.BROKER_DEREGISTERED, EventType.BROKER_REGISTERED,
                     EventType.CONTROLLER_RESIGNED, EventType.CONTROLLER_ELECTED, EventType.REASSIGNMENT_REQUESTED,
                     EventType.REASSIGNMENT_COMPLETED}  # fmt: skip
    intermediate = 0
    for record in watched:
        if record["op"] == "DELETE":
            czxid = record["before"]["czxid"]
            assert any(
                r["op"] == "DELETE"
                and r["path"] == record["path"]
                and r["before"]["czxid"] == czxid
                for r in exact_records
            ), record["path"]
            continue
        after = record["after"]
        twin = exact.get((record["path"], after["czxid"], after["version"]))
        assert twin is not None, f"txnlog mode lacks {record['path']} v{after['version']}"
        assert twin["zxid"] == record["zxid"] and twin["after"]["data"] == after["data"]
        skipped = record["versions_skipped"]
        if skipped == 0:
            assert twin["events"] == record["events"], record["path"]
            continue
        # The versions watch mode skipped are each a record of txnlog mode, and the events
        # watch mode derived across them are among theirs.
        span = [
            exact.get((record["path"], after["czxid"], v))
            for v in range(after["version"] - skipped, after["version"] + 1)
        ]
        assert all(r is not None for r in span), f"{record['path']}: an intermediate version"
        seen = {e["type"] for r in span if r is not None for e in r["events"]}
        assert {e["type"] for e in record["events"]} <= seen, record["path"]
        intermediate += skipped
    assert all(r["versions_skipped"] == 0 for r in exact_records)
    print(f"watch: {len(watched)} changes; txnlog also has {intermediate} versions watch skipped")

    # Forensics: a copy of the data dir taken after the incident, no capture running then.
    copy = tmp_path / "zookeeper-copy"
    shutil.copytree(data_dir, copy)
    alerts_out = tmp_path / "alerts.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "zkcdc", "replay", "--from-txnlog", str(copy), "--chroot",
         cluster.chroot, "--alerts-out", str(alerts_out), "--rule", "broker_down_for_ms=1000",
         # The session's earlier tests fail controllers over too: their instant alerts must
         # be over before this one's, or it joins theirs (same rule, same entity).
         "--rule", "instant_hold_ms=1000"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    alerts = [json.loads(line) for line in alerts_out.read_text().splitlines()]
    ours = {(a["rule"], a["status"]) for a in alerts if a["started_ms"] >= began_ms}
    if not {("broker_down", "FIRING"), ("controller_failover", "FIRING")} <= ours:
        pytest.fail(_forensics_diagnosis(copy, cluster.chroot, began_ms, alerts, run.stderr))
    down = [a for a in alerts if a["rule"] == "broker_down" and a["started_ms"] >= began_ms]
    assert any(a["entity"].endswith(str(follower)) for a in down), down


def _forensics_diagnosis(
    copy: Path, chroot: str, began_ms: int, alerts: list[dict[str, Any]], stderr: str
) -> str:
    """Why the replay of the copy lacks the incident's alerts: whether the copy's history holds
    the incident's changes (then the alert job lost them) or not (then reading the copy did)."""
    from zkcdc.capture.txnlog.history import history

    problems: list[str] = []
    records = list(history(copy, chroot, None, problems.append, lambda d: problems.append(str(d))))
    late = [r for r in records if r.ts_ms >= began_ms]
    kinds = sorted({e.type.value for r in late for e in r.events})
    newest = [
        (a["rule"], a["status"], a["entity"], a["started_ms"], a["ended_ms"])
        for a in sorted(alerts, key=lambda a: max(a["started_ms"], a["ended_ms"] or 0))[-8:]
    ]
    return (
        f"the replay gave no broker_down/controller_failover alert started after {began_ms}\n"
        f"history of the copy: {len(records)} records, {len(late)} after it "
        f"(ts {records[0].ts_ms if records else None}..{records[-1].ts_ms if records else None}),"
        f" event types after it: {kinds}; problems: {problems}\n"
        f"{len(alerts)} alerts, the newest: {newest}\nreplay stderr (end): {stderr[-2000:]}"
    )
