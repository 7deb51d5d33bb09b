"""The pure core: reads of znodes against the known tree become exactly the right records."""

from __future__ import annotations

from zkcdc.capture.records import Znode
from zkcdc.capture.tracker import Tracker, TrackerState, apply_records
from zkcdc.ground.change_types import EventType, Op

STATE = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
PATH = "/brokers/topics/t/partitions/0/state"


def z(version: int, czxid: int = 10, data: bytes = STATE) -> Znode:
    return Znode(data, version=version, czxid=czxid, mzxid=czxid + version, mtime_ms=1000 + version)


def tracker(**tree: Znode) -> Tracker:
    clock = iter(range(5000, 10**6))
    state = TrackerState("c1", seq=0, tree={k.replace("_", "/"): v for k, v in tree.items()})
    return Tracker(state, lambda: next(clock))


def test_the_first_sync_is_a_snapshot_of_reads_and_later_reads_are_creates():
    t = tracker()
    t.begin_sync()
    (read,) = t.read(PATH, z(3))
    assert (read.op, read.versions_skipped, read.source.snapshot, read.seq) == (Op.READ, 0, True, 1)
    assert t.end_sync() == []
    (created,) = t.read("/brokers/ids/1", Znode(b'{"version":5,"host":"h","port":1}', 2, 20, 22))
    assert (created.op, created.versions_skipped, created.source.snapshot) == (Op.CREATE, 2, False)


def test_an_update_reports_the_versions_between_the_two_reads_as_skipped():
    t = tracker()
    t.read(PATH, z(1))
    (update,) = t.read(PATH, z(4))
    assert (update.op, update.versions_skipped) == (Op.UPDATE, 2)
    assert (update.before.version, update.after.version, update.zxid, update.ts_ms) == (
        1,
        4,
        14,
        1004,
    )


def test_an_older_or_repeated_read_records_nothing():
    t = tracker()
    t.read(PATH, z(4))
    assert t.read(PATH, z(4)) == []
    assert t.read(PATH, z(2)) == []


def test_a_new_czxid_is_a_delete_then_a_create():
    t = tracker()
    t.read(PATH, z(4))
    deleted, created = t.read(PATH, z(0, czxid=99))
    assert (deleted.op, created.op) == (Op.DELETE, Op.CREATE)
    assert deleted.before.czxid == 10 and created.after.czxid == 99
    assert created.seq == deleted.seq + 1


def test_a_read_finding_no_znode_deletes_it_once():
    t = tracker()
    t.read(PATH, z(4))
    (deleted,) = t.read(PATH, None)
    assert (deleted.op, deleted.after, deleted.zxid, deleted.ts_ms) == (Op.DELETE, None, None, 5001)
    assert t.read(PATH, None) == []


def test_a_znode_announced_created_but_gone_before_its_read_is_a_delete_with_a_skipped_version():
    t = tracker()
    request = "/admin/preferred_replica_election"
    (vanished,) = t.read(request, None, 7000, announced_created=True)
    assert (vanished.op, vanished.before, vanished.after) == (Op.DELETE, None, None)
    assert (vanished.versions_skipped, vanished.ts_ms, vanished.events) == (1, 7000, ())
    # Its delete is announced and read too: nothing more. An unannounced miss says nothing.
    assert t.read(request, None, 7001) == []
    assert t.read("/never/there", None, 7002) == []


def test_a_resync_emits_only_differences_children_deleted_before_parents():
    t = tracker(**{"_a": z(0), "_a_b": z(0), "_a_b_c": z(0), "_keep": z(2), "_changed": z(1)})
    t.begin_sync()
    records = t.read("/keep", z(2)) + t.read("/changed", z(3)) + t.read("/new", z(0))
    records += t.end_sync()
    assert [(r.op, r.path) for r in records] == [
        (Op.UPDATE, "/changed"),
        (Op.CREATE, "/new"),
        (Op.DELETE, "/a/b/c"),
        (Op.DELETE, "/a/b"),
        (Op.DELETE, "/a"),
    ]
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]


def test_heartbeats_advance_seq_and_time_without_a_path():
    t = tracker()
    beat = t.heartbeat()
    assert (beat.op, beat.path, beat.seq, beat.ts_ms, beat.events) == (
        Op.HEARTBEAT,
        "",
        1,
        5000,
        (),
    )


def test_records_given_out_rebuild_the_state_of_a_restarted_daemon():
    t = tracker()
    records = t.read(PATH, z(0)) + t.read("/x", z(0)) + t.read(PATH, z(1)) + t.read("/x", None)
    records.append(t.heartbeat())
    state = TrackerState("c1")
    applied = apply_records(
        state, [r.to_avro() for r in records] + [{"cluster": "other", "seq": 99}]
    )
    assert applied == 5
    assert state.seq == 5 and set(state.tree) == {PATH} and state.tree[PATH].version == 1


def test_an_unreadable_znode_is_recorded_once_until_readable_again_or_gone():
    t = Tracker(TrackerState("c1", tree={"/brokers/ids/1": z(1, czxid=5)}), lambda: 5000)
    t.begin_sync()
    (was_known,) = t.unreadable_znode("/brokers/ids/1", "data", "no READ", 7000)
    assert (was_known.op, was_known.after, was_known.before.version) == (Op.UPDATE, None, 1)
    assert was_known.events[0].type == EventType.ZNODE_UNREADABLE
    assert was_known.events[0].reason == "data: no READ"
    assert t.unreadable_znode("/brokers/ids/1", "children", "no READ") == []  # once a znode
    (new,) = t.unreadable_znode("/admin/x", "data", "no READ")
    assert new.op == Op.CREATE
    assert t.end_sync() == []  # both seen by the walk: neither is a delete
    assert len(t.unreadable) == 2
    (readable,) = t.read("/admin/x", z(2, czxid=30))
    assert readable.op == Op.CREATE and "/admin/x" not in t.unreadable
    (gone,) = t.read("/brokers/ids/1", None)
    assert (gone.op, gone.before, gone.after) == (Op.DELETE, None, None)
    t.unreadable_znode("/admin/y", "data", "no READ")
    t.begin_sync()
    assert t.read("/admin/x", z(2, czxid=30)) == []
    (vanished,) = t.end_sync()  # not found by the next walk: deleted while unseen
    assert (vanished.op, vanished.path) == (Op.DELETE, "/admin/y") and not t.unreadable


def test_a_walk_that_reads_a_znode_behind_what_was_recorded_records_another_history():
    t = tracker()
    t.read(PATH, z(8))  # recorded: version 8 of czxid 10
    t.begin_sync()
    changed, deleted, created = t.read(PATH, z(5))  # same czxid, older: a history gone back
    assert (
        changed.op == Op.HEARTBEAT and changed.events[0].type == EventType.ZOOKEEPER_HISTORY_CHANGED
    )
    assert (deleted.op, created.op, created.versions_skipped) == (Op.DELETE, Op.CREATE, 5)
    assert t.read("/brokers/ids/1", Znode(b"x", 0, 1, 1)) != []  # unknown: a create as ever
    assert t.end_sync() == []
    assert t.read(PATH, z(4)) == []  # outside a walk an older read is just older


def test_history_changed_records_every_znode_that_differs_and_none_that_is_the_same():
    same, other = z(2, czxid=7), z(3, czxid=9)
    t = Tracker(TrackerState("c1", tree={"/a": same, "/b": other}), lambda: 5000)
    t.begin_sync()
    (note,) = [t.history_changed("rebuilt")]
    assert note.events[0].reason == "rebuilt"
    assert t.read("/a", same) == []
    assert [r.op for r in t.read("/b", z(3, czxid=9, data=b"other"))] == [Op.DELETE, Op.CREATE]
    assert t.end_sync() == []
