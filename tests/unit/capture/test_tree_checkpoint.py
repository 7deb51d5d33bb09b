"""The saved tree (capture/delivery/checkpoint.py): written off the capture loop from the copy
it was given, read back whole, a failed write leaves the previous one, and a slow one is
written less often."""

from __future__ import annotations

from pathlib import Path

from zkcdc.capture import failpoints
from zkcdc.capture.delivery.checkpoint import TREE_WRITE_SHARE, CheckpointStore
from zkcdc.capture.records import Znode


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
