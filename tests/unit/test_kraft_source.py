"""The KRaft source gives out only what the quorum has committed: records past the high
watermark wait, a held tail cut back and written again is read again (the old records never
given), and a restart goes on after the last offset given without a record twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kraft_log_writer import leader_change, metadata_batch

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.quorum_client import QuorumStatus, QuorumUnavailable
from zkcdc.capture.kraft.source import KraftSource
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.tracker import TrackerState
from zkcdc.ground.change_types import EventType


class Quorum:
    """A high watermark the test moves (None: the quorum cannot be reached)."""

    def __init__(self) -> None:
        self.high_watermark: int | None = 0

    def status(self) -> QuorumStatus:
        if self.high_watermark is None:
            raise QuorumUnavailable("down")
        return QuorumStatus(101, 1, self.high_watermark)

    def close(self) -> None:
        pass


def topic(offset: int, name: str, epoch: int = 1) -> bytes:
    return metadata_batch(offset, epoch, [(2, 0, {"Name": name, "TopicId": "A" * 21 + "Q"})])


def source(folder: Path, quorum: Quorum) -> KraftSource:
    (folder.parent / "meta.properties").write_text("cluster.id=testcluster\n")
    settings = CaptureSettings(
        source="kraft", metadata_log_dir=folder, bootstrap_controllers="127.0.0.1:1",
        poll_interval_s=0.001,
    )  # fmt: skip
    return KraftSource(settings, lambda: 1_700_000_000_000, lambda s: None, quorum=quorum)


def turns(found: KraftSource, n: int = 3) -> list[ChangeRecord]:
    out: list[ChangeRecord] = []
    for _ in range(n):
        out += found.poll(0.0).records
    return out


def topics_created(records: list[ChangeRecord]) -> list[tuple[str, int | None]]:
    return [(r.path, r.zxid) for r in records
            if r.op.value == "CREATE" and r.path.startswith("/brokers/topics/")
            and r.path.count("/") == 3]  # fmt: skip


def test_records_past_the_high_watermark_wait_until_it_passes_them(tmp_path: Path) -> None:
    folder = tmp_path / "__cluster_metadata-0"
    folder.mkdir()
    (folder / f"{0:020d}.log").write_bytes(
        leader_change(0, 1, 101, [101]) + topic(1, "a") + topic(2, "b")
    )
    quorum = Quorum()
    found = source(folder, quorum)
    assert found.open() == "testcluster"
    found.start(TrackerState(cluster="testcluster"))
    quorum.high_watermark = 2
    assert topics_created(turns(found)) == [("/brokers/topics/a", 1)]
    quorum.high_watermark = None  # down: nothing more, and no error
    assert turns(found) == []
    assert not found.connected
    quorum.high_watermark = 3
    assert topics_created(turns(found)) == [("/brokers/topics/b", 2)]


def test_a_held_tail_written_again_by_a_new_leader_gives_the_new_records_only(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "__cluster_metadata-0"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(leader_change(0, 1, 101, [101]) + topic(1, "a") + topic(2, "lost"))
    quorum = Quorum()
    found = source(folder, quorum)
    found.start(TrackerState(cluster="testcluster"))
    quorum.high_watermark = 2
    assert topics_created(turns(found)) == [("/brokers/topics/a", 1)]
    # Offset 2 was never committed: the new leader (epoch 2) truncates it and writes its own.
    log.write_bytes(leader_change(0, 1, 101, [101]) + topic(1, "a") + topic(2, "kept", epoch=2))
    quorum.high_watermark = 3
    assert topics_created(turns(found)) == [("/brokers/topics/kept", 2)]


def test_a_restart_goes_on_after_the_last_offset_given_out(tmp_path: Path) -> None:
    folder = tmp_path / "__cluster_metadata-0"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(leader_change(0, 1, 101, [101]) + topic(1, "a") + topic(2, "b"))
    quorum = Quorum()
    quorum.high_watermark = 3
    first = source(folder, quorum)
    state = TrackerState(cluster="testcluster")
    first.start(state)
    given = turns(first)
    first.close()
    with log.open("ab") as stream:
        stream.write(topic(3, "c"))
    quorum.high_watermark = 4
    restored: dict[str, Any] = {"seq": state.seq, "tree": dict(state.tree), "zxid": state.zxid}
    again = source(folder, quorum)
    again.start(TrackerState(cluster="testcluster", **restored))
    more = turns(again)
    assert topics_created(given) == [("/brokers/topics/a", 1), ("/brokers/topics/b", 2)]
    assert topics_created(more) == [("/brokers/topics/c", 3)]
    assert [r.seq for r in given + more] == list(range(1, len(given + more) + 1))


def test_a_folder_that_is_not_there_is_one_clear_error(tmp_path: Path) -> None:
    found = source(tmp_path / "__cluster_metadata-0", Quorum())  # never created
    with pytest.raises(CaptureError, match=r"no metadata log folder .*__cluster_metadata-0"):
        found.open()


def test_a_zookeeper_capture_s_stream_is_taken_over_with_the_seq_going_on(tmp_path: Path) -> None:
    """A migrated cluster: the watch capture's last tree is compared with the committed image;
    only the differences are given, ZooKeeper-only znodes stay, epochs never go back."""
    from zkcdc.capture.records import Znode

    folder = tmp_path / "__cluster_metadata-0"
    folder.mkdir()
    log = folder / f"{0:020d}.log"
    log.write_bytes(leader_change(0, 1, 101, [101]) + topic(1, "a"))
    quorum = Quorum()
    quorum.high_watermark = 2

    def zk(data: bytes) -> Znode:
        return Znode(data, 3, 0x100000010, 0x100000099, 1, 2, 0)

    watched = {
        "/consumers": zk(b""), "/consumers/g": zk(b""),
        "/migration": zk(b'{"version":0,"kraft_controller_id":101,"kraft_controller_epoch":1,'
                         b'"kraft_metadata_offset":1,"kraft_metadata_epoch":1}'),
        "/controller_epoch": zk(b"7"),
        "/brokers": zk(b""), "/brokers/topics": zk(b""), "/brokers/topics/gone": zk(b"{}"),
    }  # fmt: skip
    state = TrackerState(cluster="testcluster", seq=40, tree=dict(watched), mode="watch")
    found = source(folder, quorum)
    found.start(state)
    given = turns(found)
    paths = {r.path: r for r in given}
    assert given[0].seq == 41 and [r.seq for r in given] == list(range(41, 41 + len(given)))
    assert all(r.source.mode == "kraft" for r in given)
    assert topics_created(given) == [("/brokers/topics/a", 1)]
    assert paths["/brokers/topics/gone"].op.value == "DELETE"
    # ZooKeeper-only znodes are not KRaft's to delete; the epoch (1 in Raft) stays 7.
    assert not {"/consumers", "/consumers/g", "/migration", "/controller_epoch"} & set(paths)
    assert state.tree["/migration"] == watched["/migration"]
    assert state.mode == "kraft"
    # The next leader's epoch goes on from ZooKeeper's: 8, never back to 2.
    with log.open("ab") as stream:
        stream.write(leader_change(2, 2, 102, [101, 102]))
    quorum.high_watermark = 3
    after = turns(found)
    epochs = [
        e for r in after for e in r.events if e.type.value == EventType.CONTROLLER_EPOCH_CHANGED
    ]
    assert [(e.epoch_before, e.epoch_after) for e in epochs] == [(7, 8)]


def test_a_kraft_capture_s_own_state_is_not_taken_over_again(tmp_path: Path) -> None:
    folder = tmp_path / "__cluster_metadata-0"
    folder.mkdir()
    (folder / f"{0:020d}.log").write_bytes(leader_change(0, 1, 101, [101]) + topic(1, "a"))
    quorum = Quorum()
    quorum.high_watermark = 2
    state = TrackerState(cluster="testcluster")
    first = source(folder, quorum)
    first.start(state)
    turns(first)
    assert state.mode == "kraft"
    again = source(folder, quorum)
    again.start(TrackerState(cluster="testcluster", seq=state.seq, tree=dict(state.tree),
                             zxid=state.zxid, mode=state.mode))  # fmt: skip
    assert turns(again) == []
