"""`zkcdc capture --source txnlog` as users run it, beside a real ZooKeeper server: every version
of every write with its zxid, through kill -9 and restart without a gap or a duplicate."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from capture_harness import changes
from kazoo.client import KazooClient
from zookeeper_servers import zookeeper_server

from capture.event_log import read_records

pytestmark = pytest.mark.integration


def _state(n: int) -> bytes:
    isr = [1, 2, 3] if n % 2 else [1, 2]
    return (
        f'{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{n},"isr":{isr}}}'.encode()
    )


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
        deadline = time.monotonic() + 120
        while True:
            changes_topic.poll()
            got = [r["zxid"] for r in _live(changes_topic.records)]
            if got and max(got) >= last_zxid:
                break
            assert time.monotonic() < deadline, (
                f"topic reached zxid {max(got or [0])}, not {last_zxid}"
            )
        time.sleep(1)  # anything sent twice would be there by now
        changes_topic.poll()
        assert second.stop() == 0
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
    """Acceptance 1 of issue 8: both modes on the same storm, in the same run."""
    partitions = 20
    paths = [f"/brokers/topics/storm/partitions/{p}/state" for p in range(partitions)]
    for path in paths:
        zk_chroot.create(path, _state(0), makepath=True)
    zk_chroot.create("/cluster/id", b'{"version":"1","id":"storm"}', makepath=True)
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    data_dir = cluster.zookeeper_txnlog_dir().parent
    txnlog_log, watch_log = tmp_path / "txnlog-events", tmp_path / "watch-events"
    txnlog = start_capture(connect, "--source", "txnlog", "--zk-data-dir", str(data_dir),
                           "--event-log", str(txnlog_log))  # fmt: skip
    watch = start_capture(connect, "--event-log", str(watch_log))
    txnlog.wait_logged("capturing")
    watch.wait_logged("in sync")

    writes, window = 4_000, threading.Semaphore(200)
    answered: list[int] = []
    for n in range(1, writes + 1):
        window.acquire()
        result = zk_chroot.set_async(paths[n % partitions], _state(n))
        result.rawlink(lambda r: (answered.append(1), window.release()))
    while len(answered) < writes:
        time.sleep(0.01)
    time.sleep(3)  # both catch up
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
