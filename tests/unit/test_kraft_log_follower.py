"""Following a metadata log folder as Kafka changes it: appends, a batch written in pieces,
segment rolls, a tail cut back and written again, segments deleted by retention, damage."""

from __future__ import annotations

from pathlib import Path

import pytest
from kraft_log_writer import metadata_batch

from zkcdc.capture.kraft.log_follower import MetadataLogFollower, MetadataLogGap
from zkcdc.capture.kraft.record_batches import BatchDamage


def topic_batch(offset: int, count: int = 1, epoch: int = 1) -> bytes:
    return metadata_batch(
        offset, epoch, [(2, 0, {"Name": f"t{offset + i}", "TopicId": "A" * 22})
                        for i in range(count)]
    )  # fmt: skip


def segment(folder: Path, base: int) -> Path:
    return folder / f"{base:020d}.log"


def offsets(follower: MetadataLogFollower) -> list[int]:
    return [b.base_offset for _, b in follower.poll()]


def test_appends_are_read_once_and_a_batch_only_when_whole(tmp_path: Path) -> None:
    log = segment(tmp_path, 0)
    log.write_bytes(topic_batch(0) + topic_batch(1))
    follower = MetadataLogFollower(tmp_path, 0, lambda d: None)
    assert offsets(follower) == [0, 1]
    assert offsets(follower) == []
    third = topic_batch(2)
    with log.open("ab") as stream:
        stream.write(third[:30])
        stream.flush()
        assert offsets(follower) == []  # half a batch: not yet
        stream.write(third[30:])
    assert offsets(follower) == [2]


def test_reading_starts_at_the_offset_wanted(tmp_path: Path) -> None:
    segment(tmp_path, 0).write_bytes(topic_batch(0) + topic_batch(1, 3) + topic_batch(4))
    follower = MetadataLogFollower(tmp_path, 2, lambda d: None)
    assert offsets(follower) == [1, 4]  # the batch holding 2, then on


def test_a_rolled_segment_is_read_to_its_end_before_the_next_one(tmp_path: Path) -> None:
    segment(tmp_path, 0).write_bytes(topic_batch(0))
    follower = MetadataLogFollower(tmp_path, 0, lambda d: None)
    assert offsets(follower) == [0]
    with segment(tmp_path, 0).open("ab") as stream:
        stream.write(topic_batch(1))
    segment(tmp_path, 2).write_bytes(topic_batch(2) + topic_batch(3))
    assert offsets(follower) == [1]
    assert offsets(follower) == [2, 3]


def test_a_tail_cut_back_and_written_again_is_read_again_and_the_old_batch_is_gone(
    tmp_path: Path,
) -> None:
    log = segment(tmp_path, 0)
    log.write_bytes(topic_batch(0) + topic_batch(1, epoch=1))
    follower = MetadataLogFollower(tmp_path, 0, lambda d: None)
    reads = follower.poll()
    old_segment, old_batch = reads[1]
    # A new leader truncates the uncommitted offset 1 and writes its own (longer) batch there.
    log.write_bytes(topic_batch(0) + topic_batch(1, 2, epoch=2))
    assert not follower.still_there(old_segment, old_batch)
    follower.restart_at(1)
    rewritten = follower.poll()
    assert [(b.base_offset, b.epoch) for _, b in rewritten] == [(1, 2)]
    assert follower.still_there(*rewritten[0])


def test_a_shorter_file_is_noticed_and_read_from_the_offset_still_wanted(tmp_path: Path) -> None:
    log = segment(tmp_path, 0)
    log.write_bytes(topic_batch(0) + topic_batch(1) + topic_batch(2))
    follower = MetadataLogFollower(tmp_path, 0, lambda d: None)
    assert offsets(follower) == [0, 1, 2]
    log.write_bytes(topic_batch(0))  # cut back to offset 1
    follower.restart_at(1)
    assert offsets(follower) == []
    with log.open("ab") as stream:
        stream.write(topic_batch(1, epoch=3))
    assert [(b.base_offset, b.epoch) for _, b in follower.poll()] == [(1, 3)]


def test_a_segment_deleted_by_retention_stays_readable_while_open(tmp_path: Path) -> None:
    segment(tmp_path, 0).write_bytes(topic_batch(0))
    follower = MetadataLogFollower(tmp_path, 0, lambda d: None)
    assert offsets(follower) == [0]
    segment(tmp_path, 1).write_bytes(topic_batch(1))
    segment(tmp_path, 0).unlink()
    assert offsets(follower) == [1]


def test_an_offset_retention_removed_is_a_gap(tmp_path: Path) -> None:
    segment(tmp_path, 100).write_bytes(topic_batch(100))
    with pytest.raises(MetadataLogGap, match="starts at offset 100"):
        MetadataLogFollower(tmp_path, 5, lambda d: None)


def test_a_damaged_batch_is_reported_and_the_ones_after_it_read(tmp_path: Path) -> None:
    bad = bytearray(topic_batch(1))
    bad[-2] ^= 0x01
    segment(tmp_path, 0).write_bytes(topic_batch(0) + bytes(bad) + topic_batch(2))
    damage: list[BatchDamage] = []
    follower = MetadataLogFollower(tmp_path, 0, damage.append)
    assert offsets(follower) == [0, 2]
    assert len(damage) == 1 and damage[0].base_offset == 1
    assert damage[0].position == len(topic_batch(0))  # where in the file, for the log line
