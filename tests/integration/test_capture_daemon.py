"""`zkcdc capture` against the real ZooKeeper and Kafka: records read back from Kafka with a plain
fastavro reader. Each test watches a chroot of its own and publishes to a topic of its own."""

from __future__ import annotations

import json
import signal
import time

import pytest
from capture_harness import changes

from zkcdc.ground.change_types import EventType

pytestmark = pytest.mark.integration

STATE = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'


def _state(leader: int, isr: list[int], leader_epoch: int = 0) -> bytes:
    return json.dumps(
        {
            "controller_epoch": 1,
            "leader": leader,
            "version": 1,
            "leader_epoch": leader_epoch,
            "isr": isr,
        }
    ).encode()


def _connect(cluster, zk) -> str:
    return cluster.zookeeper_hosts + zk.chroot


def _daemon(start_capture, cluster, zk, changes_topic, *args, **kwargs):
    return start_capture(
        _connect(cluster, zk),
        "--cluster",
        "c1",
        "--session-timeout-s",
        "4",
        *args,
        publish_to=changes_topic,
        **kwargs,
    )


def test_snapshot_then_live_changes_with_heartbeats_and_unknown_paths(
    cluster, zk_chroot, start_capture, changes_topic
):
    zk_chroot.create("/brokers/topics/t/partitions/0/state", STATE, makepath=True)
    daemon = _daemon(start_capture, cluster, zk_chroot, changes_topic)
    daemon.wait_logged("in sync")

    read = changes_topic.wait_for(
        lambda r: r["op"] == "READ" and r["path"].endswith("/0/state"), "the snapshot READ"
    )[0]
    assert read["source"]["snapshot"] is True
    assert read["events"][0]["type"] == EventType.PARTITION_STATE_CREATED

    zk_chroot.set("/brokers/topics/t/partitions/0/state", _state(1, [1, 3]))
    shrunk = changes_topic.wait_event(EventType.ISR_SHRUNK, topic="t", partition=0)
    assert (shrunk["isr_before"], shrunk["isr_after"], shrunk["removed"]) == (
        [1, 2, 3],
        [1, 3],
        [2],
    )

    zk_chroot.create("/somebody/else", b"x", makepath=True)
    unknown = changes_topic.wait_for(lambda r: r["path"] == "/somebody/else", "a foreign path")[0]
    assert (unknown["op"], unknown["events"][0]["type"]) == ("CREATE", EventType.UNKNOWN_ZNODE)

    zk_chroot.delete("/somebody/else")
    changes_topic.wait_for(
        lambda r: r["path"] == "/somebody/else" and r["op"] == "DELETE", "delete"
    )
    beats = changes_topic.wait_for(lambda r: r["op"] == "HEARTBEAT", "heartbeats")
    assert daemon.stop(signal.SIGTERM) == 0
    seqs = [r["seq"] for r in sorted(changes_topic.records, key=lambda r: r["seq"])]
    assert len(seqs) == len(set(seqs))
    assert beats and all(k.startswith(b"c1") for k in changes_topic.keys)


def test_a_znode_created_and_deleted_before_it_could_be_read_is_a_delete_with_a_skipped_version(
    cluster, zk_chroot, start_capture, changes_topic
):
    zk_chroot.ensure_path("/admin")
    daemon = _daemon(start_capture, cluster, zk_chroot, changes_topic)
    daemon.wait_logged("in sync")

    # One multi: both notices come after both writes, so the read finds nothing, every time.
    request = "/admin/preferred_replica_election"
    transaction = zk_chroot.transaction()
    transaction.create(request, b'{"version":1,"partitions":[{"topic":"t","partition":0}]}')
    transaction.delete(request)
    assert all(result is True or isinstance(result, str) for result in transaction.commit())
    zk_chroot.create("/admin/after", b"x")

    changes_topic.wait_for(lambda r: r["path"] == "/admin/after", "the next change")
    assert daemon.stop(signal.SIGTERM) == 0
    # Another path, maybe another partition: read whole, not up to the later change's record.
    changes_topic.read_to_end()
    vanished = [r for r in changes_topic.records if r["path"] == request]
    assert [(r["op"], r["before"], r["after"], r["versions_skipped"]) for r in vanished] == [
        ("DELETE", None, None, 1)
    ]


def test_garbage_in_a_state_znode_is_unparseable_and_capture_goes_on(
    cluster, zk_chroot, start_capture, changes_topic
):
    zk_chroot.create("/brokers/topics/t/partitions/0/state", STATE, makepath=True)
    zk_chroot.create("/brokers/topics/t/partitions/1/state", STATE, makepath=True)
    daemon = _daemon(start_capture, cluster, zk_chroot, changes_topic)
    daemon.wait_logged("in sync")

    zk_chroot.set("/brokers/topics/t/partitions/0/state", b"\xff{not json")
    bad = changes_topic.wait_event(EventType.UNPARSEABLE, topic="t", partition=0)
    assert "UTF-8" in bad["reason"]
    record = next(r for r in changes_topic.records if r["seq"] == bad["_seq"])
    assert record["after"]["data"] == b"\xff{not json"  # the raw bytes stay

    zk_chroot.set("/brokers/topics/t/partitions/1/state", _state(2, [2, 3], leader_epoch=1))
    moved = changes_topic.wait_event(EventType.LEADER_CHANGED, topic="t", partition=1)
    assert (moved["leader_before"], moved["leader_after"]) == (1, 2)
    assert daemon.process.poll() is None


def test_the_legacy_consumers_tree_in_the_seed_format_gives_consumer_events(
    cluster, kafka_zk, start_capture, changes_topic
):
    group = f"legacy-{time.monotonic_ns()}"
    consumer = f"{group}_hadoop2-1525747915241-6b48ff32"
    daemon = start_capture(cluster.zookeeper_hosts + cluster.chroot, publish_to=changes_topic)
    daemon.wait_logged("in sync")
    try:
        kafka_zk.create(
            f"/consumers/{group}/ids/{consumer}",
            b'{"version":1,"subscription":{"orders":2},"pattern":"static","timestamp":"1411294187842"}',
            makepath=True,
        )
        kafka_zk.create(
            f"/consumers/{group}/owners/orders/0", f"{consumer}-0".encode(), makepath=True
        )
        kafka_zk.create(f"/consumers/{group}/offsets/orders/0", b"42", makepath=True)
        changes_topic.wait_event(EventType.OFFSET_COMMITTED, group=group, offset_after=42)
        kafka_zk.set(f"/consumers/{group}/offsets/orders/0", b"57")
        kafka_zk.delete(f"/consumers/{group}/ids/{consumer}")

        registered = changes_topic.wait_event(EventType.CONSUMER_REGISTERED, group=group)
        assert (registered["consumer_id"], registered["subscription"]) == (consumer, {"orders": 2})
        owner = changes_topic.wait_event(EventType.PARTITION_OWNER_CHANGED, group=group)
        assert (owner["topic"], owner["partition"], owner["owner_after"]) == (
            "orders",
            0,
            f"{consumer}-0",
        )
        committed = changes_topic.wait_event(
            EventType.OFFSET_COMMITTED, group=group, offset_after=57
        )
        assert committed["offset_before"] == 42
        changes_topic.wait_event(EventType.CONSUMER_DEREGISTERED, group=group, consumer_id=consumer)
        # The cluster is named by Kafka's own /cluster/id.
        cluster_id = json.loads(kafka_zk.get("/cluster/id")[0])["id"]
        assert {r["cluster"] for r in changes_topic.records} == {cluster_id}
    finally:
        kafka_zk.delete(f"/consumers/{group}", recursive=True)


def test_a_daemon_killed_and_restarted_emits_each_change_once_and_continues_seq(
    cluster, zk_chroot, start_capture, changes_topic, tmp_path
):
    for p in range(3):
        zk_chroot.create(f"/brokers/topics/t/partitions/{p}/state", STATE, makepath=True)
    first = _daemon(start_capture, cluster, zk_chroot, changes_topic, state_dir=tmp_path)
    first.wait_logged("in sync")
    zk_chroot.set("/brokers/topics/t/partitions/0/state", _state(1, [1, 2]))
    changes_topic.wait_event(EventType.ISR_SHRUNK, partition=0)
    first.stop(signal.SIGKILL)
    last_seq_before = max(r["seq"] for r in changes_topic.records)

    # While no daemon runs: an update, a create, a delete.
    zk_chroot.set("/brokers/topics/t/partitions/1/state", _state(2, [2, 3], leader_epoch=1))
    zk_chroot.create("/brokers/topics/t/partitions/3/state", STATE, makepath=True)
    zk_chroot.delete("/brokers/topics/t/partitions/2", recursive=True)

    second = _daemon(start_capture, cluster, zk_chroot, changes_topic, state_dir=tmp_path)
    second.wait_logged("in sync")
    changes_topic.wait_for(lambda r: r["path"].endswith("/2") and r["op"] == "DELETE", "the delete")
    changes_topic.wait_event(EventType.LEADER_CHANGED, partition=1)
    changes_topic.wait_event(EventType.PARTITION_STATE_CREATED, partition=3)
    assert second.stop() == 0
    changes_topic.read_to_end()  # the daemons stopped: anything sent twice is read too

    seen = changes(changes_topic.records)
    assert len(seen) == len(set(seen)), "a (path, version) appeared twice"
    later = [r for r in changes_topic.records if r["seq"] > last_seq_before]
    assert later and all(r["op"] != "READ" for r in later), "the restart re-read the whole tree"
    by_seq = sorted(r["seq"] for r in changes_topic.records)
    assert by_seq == sorted(set(by_seq)), "a seq was reused"
    ops = {(r["op"], r["path"]) for r in later}
    assert ("UPDATE", "/brokers/topics/t/partitions/1/state") in ops
    assert ("CREATE", "/brokers/topics/t/partitions/3/state") in ops
    assert ("DELETE", "/brokers/topics/t/partitions/2/state") in ops
    assert ("UPDATE", "/brokers/topics/t/partitions/0/state") not in ops


def test_a_standby_takes_over_when_the_active_daemon_is_killed_without_a_gap(
    cluster, zk_chroot, start_capture, changes_topic
):
    zk_chroot.create("/brokers/topics/t/partitions/0/state", STATE, makepath=True)
    active = _daemon(start_capture, cluster, zk_chroot, changes_topic)
    active.wait_logged("in sync")
    standby = _daemon(start_capture, cluster, zk_chroot, changes_topic)
    standby.wait_logged("standby")

    for epoch in range(1, 4):
        zk_chroot.set("/brokers/topics/t/partitions/0/state", _state(1, [1, 2, 3], epoch))
    changes_topic.wait_event(EventType.LEADER_EPOCH_BUMPED, leader_epoch_after=3)
    active.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    # Changes while nobody is active: the new active must report them, and only them.
    zk_chroot.set("/brokers/topics/t/partitions/0/state", _state(2, [2, 3], 4))
    zk_chroot.create("/brokers/topics/t/partitions/1/state", STATE, makepath=True)

    standby.wait_logged("capturing", timeout_s=30)
    took_over_s = time.monotonic() - killed_at
    changes_topic.wait_event(EventType.LEADER_CHANGED, leader_after=2)
    changes_topic.wait_event(EventType.PARTITION_STATE_CREATED, partition=1)
    assert took_over_s < 4 + 10  # session timeout, plus the standby's start-up
    assert standby.stop() == 0
    changes_topic.read_to_end()  # the daemons stopped: anything sent twice is read too

    state_versions = [
        r["after"]["version"]
        for r in changes_topic.records
        if r["path"] == "/brokers/topics/t/partitions/0/state" and r["after"]
    ]
    assert state_versions[0] == 0 and state_versions[-1] == 4
    assert state_versions == sorted(set(state_versions)), "a version twice or out of order"
    skipped = sum(
        r["versions_skipped"]
        for r in changes_topic.records
        if r["path"] == "/brokers/topics/t/partitions/0/state"
    )
    assert len(state_versions) + skipped == 5, "a version neither seen nor reported skipped"
    seqs = [r["seq"] for r in changes_topic.records]
    assert len(seqs) == len(set(seqs))
    reads = [r for r in changes_topic.records if r["op"] == "READ"]
    assert all(r["source"]["session_id"] == reads[0]["source"]["session_id"] for r in reads), (
        "the standby snapshotted the tree again"
    )


def test_a_znode_capture_may_not_read_is_recorded_as_unreadable_and_counted(
    cluster, zk_chroot, start_capture, changes_topic
):
    from kazoo.security import make_digest_acl

    locked = [make_digest_acl("somebody-else", "secret", all=True)]
    zk_chroot.ensure_path("/config/topics")  # open parents: a delete needs the parent's DELETE
    zk_chroot.create("/config/topics/hidden", b"{}", acl=locked)
    zk_chroot.create("/config/topics/open", b'{"version":1,"config":{}}')
    try:
        daemon = _daemon(start_capture, cluster, zk_chroot, changes_topic)
        daemon.wait_logged("in sync")
        synced = next(line for line in daemon.log_lines() if line.get("event") == "in sync")
        assert synced["unreadable_znodes"] == 1
        first = changes_topic.wait_event(EventType.ZNODE_UNREADABLE, snapshot=True)
        record = next(r for r in changes_topic.records if r["seq"] == first["_seq"])
        assert (record["path"], record["op"], record["after"]) == (
            "/config/topics/hidden",
            "READ",
            None,
        )
        assert first["reason"].startswith("data: ") and "no READ permission" in first["reason"]
        # A change next to it is captured as ever.
        zk_chroot.set("/config/topics/open", b'{"version":1,"config":{"retention.ms":"1"}}')
        changes_topic.wait_event(EventType.CONFIG_CHANGED)
        assert daemon.stop(signal.SIGTERM) == 0
    finally:
        zk_chroot.delete("/config/topics/hidden")  # the chroot's removal cannot list it


@pytest.mark.parametrize(
    ("mode", "parent"),
    [("recursive", "/admin"), ("recursive", "/config/users"), ("one-shot", "/admin")],
)
def test_an_unreadable_znode_made_live_is_recorded_at_once_and_so_is_its_delete(
    cluster, zk_chroot, start_capture, changes_topic, mode, parent
):
    """ZooKeeper 3.8.4+ tells a persistent recursive watch nothing of a znode the watcher may not
    read (CVE-2024-23944); the parent's child watch does announce it, in either watch mode, and
    under a parent that had no children when capture walked the tree (/config/users) too. It
    is recorded within the round trips of the announcement: nothing here waits for a walk."""
    from kazoo.security import make_digest_acl

    locked = [make_digest_acl("somebody-else", "secret", all=True)]
    zk_chroot.ensure_path(parent)
    zk_chroot.ensure_path("/brokers/ids")
    daemon = _daemon(start_capture, cluster, zk_chroot, changes_topic, "--watch-mode", mode)
    daemon.wait_logged("in sync")
    path = f"{parent}/locked"
    zk_chroot.create(path, b"x", acl=locked)
    try:
        made = changes_topic.wait_for(lambda r: r["path"] == path, "the new znode")
        assert [(r["op"], r["after"], r["events"][0]["type"]) for r in made] == [
            ("CREATE", None, EventType.ZNODE_UNREADABLE)
        ]
        # No walk came in between: the daemon synced once, at its start.
        assert sum(line.get("event") == "in sync" for line in daemon.log_lines()) == 1
    finally:
        zk_chroot.delete(path)
    changes_topic.wait_for(lambda r: r["path"] == path and r["op"] == "DELETE",
                           "the unreadable znode's delete")  # fmt: skip
    assert daemon.stop(signal.SIGTERM) == 0


def test_the_changes_topic_deleted_under_capture_is_named_never_auto_created_nor_reused_resized(
    cluster, zk_chroot, start_capture, changes_topic, tmp_path
):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    state_dir = tmp_path / "state"
    zk_chroot.create("/brokers/topics/t/partitions/0/state", STATE, makepath=True)
    daemon = _daemon(start_capture, cluster, zk_chroot, changes_topic, state_dir=state_dir)
    daemon.wait_logged("in sync")
    changes_topic.wait_for(lambda r: r["op"] == "READ", "the snapshot")
    admin.delete_topics([changes_topic.topic])[changes_topic.topic].result(60)
    zk_chroot.set("/brokers/topics/t/partitions/0/state", _state(1, [1, 3]))
    assert daemon.process.wait(90) != 0
    said = daemon.tail(5)
    assert f"changes topic {changes_topic.topic} is gone" in said and "6 partition" in said, said
    assert changes_topic.topic not in admin.list_topics(timeout=30).topics  # not auto-created

    # Re-made with one partition (as a broker's auto-creation would): refused, then accepted.
    admin.create_topics([NewTopic(changes_topic.topic, 1, 1)])[changes_topic.topic].result(60)
    refused = _daemon(start_capture, cluster, zk_chroot, changes_topic, state_dir=state_dir)
    assert refused.process.wait(90) != 0
    assert "has 1 partition(s), but capture keyed its records for 6" in refused.tail(5)
    accepted = _daemon(start_capture, cluster, zk_chroot, changes_topic,
                       "--accept-partition-count", state_dir=state_dir)  # fmt: skip
    accepted.wait_logged("in sync")
    # Nothing lost: the change made while the topic was gone reaches the new topic.
    changes_topic.wait_event(EventType.ISR_SHRUNK, topic="t", partition=0)
    assert accepted.stop(signal.SIGTERM) == 0
