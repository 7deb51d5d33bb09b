"""The saved tree (capture/delivery/checkpoint.py): written off the capture loop from the copy
it was given, read back whole, a failed write leaves the previous one, a slow one is written
less often, and an unchanged one not again for a while."""

from __future__ import annotations

from pathlib import Path

import fastavro
import pytest

from zkcdc.capture import failpoints
from zkcdc.capture.delivery.checkpoint import TREE_WRITE_SHARE, CheckpointStore
from zkcdc.capture.delivery.record_outlet import UNCHANGED_TREE_MAX_S, RecordOutlet
from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.records import ChangeRecord, Source, Znode
from zkcdc.capture.settings import load_settings
from zkcdc.ground.change_types import Op


def _tree(n: int, version: int) -> dict[str, Znode]:
    return {f"/brokers/topics/t/partitions/{i}/state": Znode(b"{}", version, i, i + version)
            for i in range(n)}  # fmt: skip


def test_a_tree_saved_in_the_background_is_read_back_as_it_was_given(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state", tmp_path / "events", "c1")
    live = _tree(1_000, 1)
    store.save_tree(7, dict(live), background=True, zxid=70, mode="watch")
    live.clear()  # the loop goes on changing its own tree; the checkpoint has its copy
    store.wait()
    loaded = store.load()
    assert (loaded.seq, loaded.zxid, loaded.mode) == (7, 70, "watch")
    assert loaded.tree == _tree(1_000, 1)


def test_a_failed_tree_write_leaves_the_last_one(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state", tmp_path / "events", "c1")
    store.save_tree(3, _tree(10, 1), background=False)
    failpoints.arm("checkpoint.tree=1:raise")  # EIO as the new file replaces the last one
    try:
        store.save_tree(9, _tree(20, 2), background=True)  # logged, not raised, off the loop
        store.wait()
    finally:
        failpoints.arm("")
    loaded = store.load()
    assert (loaded.seq, loaded.tree) == (3, _tree(10, 1))


def test_a_tree_that_takes_long_to_write_is_written_less_often(tmp_path: Path) -> None:
    """An idle capture of a large cluster does not spend a core writing its tree again and
    again: the next is due once the last one's write is at most TREE_WRITE_SHARE of the time."""
    ticks = iter([100.0, 112.0, 200.0, 200.5])  # each write's start and end
    store = CheckpointStore(tmp_path / "state", tmp_path / "events", "c1", lambda: next(ticks))
    assert store.next_tree_in(30.0) == 30.0  # none written yet
    store.save_tree(3, _tree(10, 1), background=False)
    assert store.next_tree_in(30.0) == 12.0 / TREE_WRITE_SHARE
    store.save_tree(4, _tree(10, 1), background=True)
    store.wait()
    assert store.next_tree_in(30.0) == 30.0  # quick again: every `checkpoint_s`


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_tree_only_heartbeats_followed_is_not_written_again_until_the_bound(
    tmp_path: Path,
) -> None:
    """An idle capture gives out heartbeats and nothing else: its saved tree stays the one it
    wrote, and a restart from it (the log's heartbeats replayed over it) is where it stopped. A
    change, or UNCHANGED_TREE_MAX_S since the last write, writes it again."""
    clock = _Clock()
    settings = load_settings(None, zookeeper="127.0.0.1:1", state_dir=tmp_path, cluster="c1")
    outlet = RecordOutlet(settings, "c1", CaptureMetrics(), now=clock)
    state = outlet.load()
    state.mode = "watch"  # as the records' source says
    outlet.open()
    tree_file = settings.state_path("c1") / "tree.avro"
    every = settings.checkpoint_s

    def give(op: Op, path: str = "") -> None:
        state.seq += 1
        after = None if op == Op.HEARTBEAT else Znode(b"{}", state.seq, 1, state.seq)
        if after is not None:
            state.tree[path] = after
        outlet.give_out([ChangeRecord("c1", state.seq, op, path, None, after, None, 0, 0)])

    def turn(seconds: float) -> int | None:
        """Time passes by `seconds` with a heartbeat; the seq the saved tree is as of then."""
        clock.now += seconds
        give(Op.HEARTBEAT)
        outlet.tick(state)
        outlet.store.wait()
        return saved_seq()

    def saved_seq() -> int | None:
        if not tree_file.exists():
            return None
        with tree_file.open("rb") as saved:
            return int(fastavro.reader(saved).metadata["zkcdc.seq"])

    give(Op.CREATE, "/brokers/ids/1")
    first = turn(every)
    assert first == state.seq  # the first is written
    for _ in range(5):  # idle: only heartbeats
        assert turn(every) == first
    assert outlet.store.load() == state  # the older tree and the log's heartbeats after it

    give(Op.UPDATE, "/brokers/ids/1")  # a change: written at the next checkpoint
    changed = turn(every)
    assert changed == state.seq and outlet.store.load() == state
    assert turn(every) == changed
    bound = turn(UNCHANGED_TREE_MAX_S)
    assert bound == state.seq  # the bound: written again though unchanged
    assert outlet.store.load() == state
    give(Op.HEARTBEAT)
    outlet.close(state)  # a stop writes no unchanged tree either
    assert saved_seq() == bound and outlet.store.load() == state


@pytest.mark.parametrize("mode", ["txnlog", "kraft"])
def test_a_position_that_moves_with_nothing_recorded_writes_no_tree_and_a_restart_takes_it(
    tmp_path: Path, mode: str
) -> None:
    """A KRaft log moves with the controller's NoOps, a transaction log with sessions: the
    position moves while only heartbeats go out. The tree is not written again for that, and a
    restart from it (the heartbeats replayed over it) resumes at the last heartbeat's position,
    from where reading again finds nothing to record."""
    clock = _Clock()
    settings = load_settings(None, zookeeper="127.0.0.1:1", state_dir=tmp_path, cluster="c1")
    outlet = RecordOutlet(settings, "c1", CaptureMetrics(), now=clock)
    state = outlet.load()
    state.mode = mode
    outlet.open()
    tree_file = settings.state_path("c1") / "tree.avro"
    source = Source(mode, None, False)

    def turn(op: Op = Op.HEARTBEAT) -> None:
        state.seq += 1
        state.zxid += 7  # NoOps, sessions: nothing capture keeps
        after = None if op == Op.HEARTBEAT else Znode(b"{}", state.seq, 1, state.zxid)
        path = "" if after is None else "/brokers/ids/1"
        if after is not None:
            state.tree[path] = after
        outlet.give_out([ChangeRecord("c1", state.seq, op, path, None, after, state.zxid, 0, 0,
                                      source=source)])  # fmt: skip
        clock.now += settings.checkpoint_s
        outlet.tick(state)
        outlet.store.wait()

    turn(Op.CREATE)
    written = tree_file.stat().st_mtime_ns
    for _ in range(5):
        turn()
    assert tree_file.stat().st_mtime_ns == written  # not written again
    assert outlet.store.load() == state  # the position from the last heartbeat
    beat = state.zxid
    state.zxid += 3  # read after the last heartbeat, nothing in it to record
    outlet.close(state)
    loaded = outlet.store.load()
    assert tree_file.stat().st_mtime_ns == written
    assert (loaded.seq, loaded.mode, loaded.zxid) == (state.seq, mode, beat)
    assert loaded.tree == state.tree


def test_a_tree_whose_write_failed_is_written_at_the_next_checkpoint_though_idle(
    tmp_path: Path,
) -> None:
    """Only a tree written counts as saved: after a failed write (EIO as the file is replaced)
    an idle capture does not wait for the hour's bound to write it."""
    clock = _Clock()
    settings = load_settings(None, zookeeper="127.0.0.1:1", state_dir=tmp_path, cluster="c1")
    outlet = RecordOutlet(settings, "c1", CaptureMetrics(), now=clock)
    state = outlet.load()
    state.mode = "watch"
    outlet.open()
    seqs = iter(range(1, 100))

    def turn(op: Op = Op.HEARTBEAT) -> None:
        state.seq = next(seqs)
        after = None if op == Op.HEARTBEAT else Znode(b"{}", state.seq, 1, state.seq)
        path = "" if after is None else "/brokers/ids/1"
        if after is not None:
            state.tree[path] = after
        outlet.give_out([ChangeRecord("c1", state.seq, op, path, None, after, None, 0, 0)])
        clock.now += settings.checkpoint_s
        outlet.tick(state)
        outlet.store.wait()

    failpoints.arm("checkpoint.tree=1:raise")
    try:
        turn(Op.CREATE)  # its checkpoint fails
    finally:
        failpoints.arm("")
    assert outlet.store.saved_tree is None
    turn()  # idle, but nothing is saved: written
    assert outlet.store.saved_tree is not None and outlet.store.saved_tree.seq == state.seq
    assert outlet.store.load() == state
    outlet.close(state)
