"""Transactions applied to the known tree (pure, no server): exact versions, zxids and before
images; multis, session closes and the chroot; a fuzzy snapshot's already-applied transactions
change nothing; a restart knows the zxid to resume after."""

from __future__ import annotations

import json

from zkcdc.capture.records import Znode
from zkcdc.capture.tracker import TrackerState, apply_records
from zkcdc.capture.txnlog.snapshot import Snapshot
from zkcdc.capture.txnlog.transactions import (
    CHECK,
    CLOSE_SESSION,
    CREATE,
    CREATE2,
    DELETE,
    ERROR,
    MULTI,
    SET_DATA,
    Txn,
)
from zkcdc.capture.txnlog.transactions import Op as TxnOp
from zkcdc.capture.txnlog.txn_tracker import TxnTracker
from zkcdc.ground.change_types import EventType, Op

SESSION = 0x77


def txn(zxid: int, *ops: TxnOp, kind: int | None = None, session: int = SESSION) -> Txn:
    return Txn(
        session, 1, zxid, 1_000 + zxid, kind or (MULTI if len(ops) > 1 else ops[0].type), ops, 0
    )


def state_json(leader: int, isr: list[int], epoch: int) -> bytes:
    body = {
        "controller_epoch": 1,
        "leader": leader,
        "version": 1,
        "leader_epoch": epoch,
        "isr": isr,
    }
    return json.dumps(body).encode()


STATE = "/kafka/brokers/topics/t/partitions/0/state"


def tracker(tree: dict[str, Znode] | None = None, zxid: int = 0) -> TxnTracker:
    return TxnTracker(TrackerState("c", tree=dict(tree or {}), zxid=zxid), lambda: 5_000, "/kafka")


def test_every_set_data_is_an_update_with_its_exact_version_zxid_time_and_before_image():
    t = tracker()
    created = t.apply(txn(10, TxnOp(CREATE, STATE, state_json(1, [1, 2, 3], 0))))
    shrunk = t.apply(txn(11, TxnOp(SET_DATA, STATE, state_json(1, [1, 2], 0), version=1)))
    expanded = t.apply(txn(12, TxnOp(SET_DATA, STATE, state_json(1, [1, 2, 3], 0), version=2)))
    assert [r.op for r in created + shrunk + expanded] == [Op.CREATE, Op.UPDATE, Op.UPDATE]
    (u1,) = shrunk
    assert (u1.path, u1.zxid, u1.ts_ms, u1.versions_skipped) == (
        "/brokers/topics/t/partitions/0/state",
        11,
        1011,
        0,
    )
    assert u1.before == created[0].after and u1.after is not None
    assert (u1.after.version, u1.after.czxid, u1.after.mzxid, u1.after.mtime_ms) == (
        1,
        10,
        11,
        1011,
    )
    assert u1.source.mode == "txnlog" and u1.source.session_id == SESSION
    assert [e.type.value for e in u1.events] == [EventType.ISR_SHRUNK]
    assert [e.type.value for e in expanded[0].events] == [EventType.ISR_EXPANDED]


def test_a_multi_applies_its_operations_in_order_and_checks_and_errors_change_nothing():
    t = tracker()
    records = t.apply(
        txn(
            20,
            TxnOp(CHECK, "/kafka/controller_epoch", version=2),
            TxnOp(CREATE2, "/kafka/brokers/ids/1", None, ephemeral=True),
            TxnOp(
                SET_DATA,
                "/kafka/brokers/ids/1",
                b'{"version":5,"host":"h","port":1,"endpoints":[]}',
                version=1,
            ),
        )
    )
    assert [(r.op, r.after.version if r.after else None) for r in records] == [
        (Op.CREATE, 0),
        (Op.UPDATE, 1),
    ]
    assert records[1].after is not None and records[1].after.ephemeral_owner == SESSION
    assert [e.type.value for r in records for e in r.events] == [EventType.BROKER_REGISTERED]
    failed = t.apply(txn(21, TxnOp(ERROR, error=-101), TxnOp(ERROR, error=-2)))
    assert failed == [] and t.state.zxid == 21


def test_a_session_close_deletes_its_ephemerals_listed_or_not():
    t = tracker()
    t.apply(txn(30, TxnOp(CREATE, "/kafka/brokers/ids/2", b"{}", ephemeral=True)))
    t.apply(txn(31, TxnOp(CREATE, "/kafka/brokers/ids/3", b"{}", ephemeral=True), session=9))
    listed = t.apply(txn(32, TxnOp(CLOSE_SESSION, paths=("/kafka/brokers/ids/2",))))
    unlisted = t.apply(txn(33, TxnOp(CLOSE_SESSION), session=9))  # ZooKeeper before 3.6
    assert [(r.op, r.path, r.zxid) for r in listed + unlisted] == [
        (Op.DELETE, "/brokers/ids/2", 32),
        (Op.DELETE, "/brokers/ids/3", 33),
    ]
    assert t.state.tree == {}


def test_paths_outside_the_chroot_are_not_kafkas_and_give_nothing():
    t = tracker()
    assert t.apply(txn(40, TxnOp(CREATE, "/kafkaesque", b"x"))) == []
    assert t.apply(txn(41, TxnOp(CREATE, "/other/kafka", b"x"))) == []
    (root,) = t.apply(txn(42, TxnOp(CREATE, "/kafka", b"")))
    assert root.path == "/"


def test_a_fuzzy_snapshots_already_applied_transactions_change_nothing():
    known = {
        "/a": Znode(b"v3", 3, czxid=5, mzxid=52, ctime_ms=1, mtime_ms=2),
        "/b": Znode(b"new", 0, czxid=55, mzxid=55, ctime_ms=1, mtime_ms=2),
    }
    t = tracker({p: z for p, z in known.items()}, zxid=50)
    assert t.apply(txn(51, TxnOp(SET_DATA, "/kafka/a", b"v2", version=2))) == []  # in the snapshot
    assert t.apply(txn(52, TxnOp(SET_DATA, "/kafka/a", b"v3", version=3))) == []
    assert t.apply(txn(53, TxnOp(DELETE, "/kafka/b"))) == []  # /b was created again after
    assert t.apply(txn(54, TxnOp(DELETE, "/kafka/gone"))) == []
    assert t.apply(txn(55, TxnOp(CREATE, "/kafka/b", b"new"))) == []
    (update,) = t.apply(txn(56, TxnOp(SET_DATA, "/kafka/a", b"v4", version=4)))
    assert update.before == known["/a"] and update.versions_skipped == 0
    assert t.apply(txn(56, TxnOp(SET_DATA, "/kafka/a", b"v4", version=4))) == []  # read twice


def test_a_snapshot_is_read_records_then_a_heartbeat_with_its_zxid_and_a_restart_resumes_after_it():
    t = tracker()
    snapshot = Snapshot(
        0x90,
        {
            "/": Znode(b"", 0),
            "/kafka": Znode(b"", 0, czxid=1, mzxid=1),
            "/kafka/controller": Znode(
                b'{"version":1,"brokerid":1,"timestamp":"1"}', 0, 7, 7, 111, 222
            ),
        },
        {},
    )
    records = t.load_snapshot(snapshot)
    assert [(r.op, r.path) for r in records] == [
        (Op.READ, "/"),
        (Op.READ, "/controller"),
        (Op.HEARTBEAT, ""),
    ]
    # The heartbeat is at the snapshot's time, not now (5_000 here): event time stays ZooKeeper's.
    assert records[-1].ts_ms == 222
    assert records[-1].zxid == 0x90 and all(r.source.mode == "txnlog" for r in records)
    update = t.apply(txn(0x91, TxnOp(SET_DATA, "/kafka/controller", b"{}", version=1)))
    restarted = TrackerState("c")
    apply_records(restarted, [r.to_avro() for r in records + update])
    assert restarted.zxid == 0x91 and restarted.tree == t.state.tree


def test_a_gap_in_the_logs_is_resynced_from_a_snapshot_and_counted_as_versions_skipped():
    t = tracker({"/a": Znode(b"v1", 1, czxid=5, mzxid=6)}, zxid=6)
    later = Snapshot(0x100, {"/kafka/a": Znode(b"v9", 9, czxid=5, mzxid=0xF0)}, {})
    records = t.load_snapshot(later)
    update = records[0]
    assert update.op == Op.UPDATE and update.versions_skipped == 7
    assert t.state.zxid == 0x100
