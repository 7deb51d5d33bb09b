"""The snapshot and log readers at their edges (files written by hand): a damaged snapshot is
passed over for an older one, a corrupt entry is reported by file and offset and its file
skipped, a torn tail left behind by a roll-over is reported, purged history is a gap."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from zk_files import create_txn, log_file, set_data_txn, snapshot_bytes

from zkcdc.capture.txnlog.data_dir import HistoryGap, LogReader, read_history, start_snapshot
from zkcdc.capture.txnlog.snapshot import read_snapshot
from zkcdc.capture.txnlog.transactions import TxnLogError
from zkcdc.cli import main

NODES = {"": (b"", 0, 0), "/kafka": (b"", 0, 2), "/kafka/a": (b"v1", 1, 3)}


def test_a_snapshot_is_checked_and_a_damaged_or_unfinished_one_is_passed_over(tmp_path):
    good = snapshot_bytes(NODES)
    assert read_snapshot(good, 3).nodes["/kafka/a"].data == b"v1"
    flipped = bytearray(good)
    flipped[good.index(b"v1")] ^= 1
    with pytest.raises(TxnLogError, match="checksum"):
        read_snapshot(bytes(flipped), 3)
    with pytest.raises(TxnLogError, match="cut short"):
        read_snapshot(good[: len(good) // 2], 3)
    (tmp_path / "snapshot.3").write_bytes(good)
    (tmp_path / "snapshot.9").write_bytes(good[:40])  # still being written
    problems: list[str] = []
    assert start_snapshot(tmp_path, problems.append).zxid == 3
    assert len(problems) == 1 and "snapshot.9" in problems[0]


def test_a_corrupt_entry_is_reported_by_file_and_offset_never_given_out_and_its_file_skipped(
    tmp_path,
):
    first = log_file(tmp_path, 1, [create_txn(1, "/kafka/a", b"v0")] + [
        set_data_txn(z, "/kafka/a", f"v{z - 1}".encode(), z - 1) for z in (2, 3, 4)
    ])  # fmt: skip
    raw = bytearray(first.read_bytes())
    victim = raw.index(b"v2")  # the entry of zxid 3
    raw[victim] ^= 0xFF
    first.write_bytes(bytes(raw))
    log_file(tmp_path, 5, [set_data_txn(5, "/kafka/a", b"v4", 4)])
    damage = []
    zxids = [t.zxid for t in read_history(tmp_path, 0, damage.append)]
    assert zxids == [1, 2, 5]
    (found,) = damage
    assert found.file == first and "checksum" in found.reason and "entry at" in found.reason


def _torn(file, zxid_data: bytes) -> tuple[bytes, bytes]:
    """The file as a read racing ZooKeeper's write may see it: the entry holding `zxid_data`
    has its end byte but zeros where its start should be; and the file as written."""
    whole = file.read_bytes()
    at = whole.index(zxid_data)
    return whole[: at - 20] + b"\0" * 20 + whole[at:], whole


def test_an_entry_read_while_being_written_is_read_again_not_reported_as_damage(tmp_path):
    file = log_file(tmp_path, 1, [create_txn(1, "/k", b"v0"), set_data_txn(2, "/k", b"v1", 1)])
    torn, whole = _torn(file, b"v1")
    file.write_bytes(torn)
    clock, damage = [0.0], []
    reader = LogReader(tmp_path, 0, damage.append, now=lambda: clock[0])
    assert [t.zxid for t in reader.poll()] == [1]
    clock[0] += 0.5
    assert reader.poll() == [] and damage == []
    file.write_bytes(whole)  # the write finished
    assert [t.zxid for t in reader.poll()] == [2]
    assert damage == []


def test_following_an_entry_being_written_in_preallocated_padding_reads_little(
    tmp_path, monkeypatch
):
    # ZooKeeper preallocates its log: at the written end the rest of the file is zeros, so a
    # read always comes back full. An entry still being written there must not make the reader
    # copy megabytes of padding on every poll (it did, flat out: a third of its CPU).
    file = log_file(tmp_path, 1, [create_txn(1, "/k", b"v0"), set_data_txn(2, "/k", b"v1", 1)],
                    padding=16 * 2**20)  # fmt: skip
    whole = file.read_bytes()
    unfinished = bytearray(whole)
    at = whole.index(b"v1")
    unfinished[at - 20 : at + 40] = b"\0" * 60  # body and end byte not written yet
    file.write_bytes(bytes(unfinished))
    sizes: list[int] = []
    real_pread = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        sizes.append(size)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(os, "pread", pread)
    reader = LogReader(tmp_path, 0, lambda damage: None)
    assert [t.zxid for t in reader.poll()] == [1]
    for _ in range(5):
        assert reader.poll() == []
    file.write_bytes(whole)  # the write finished
    assert [t.zxid for t in reader.poll()] == [2]
    assert max(sizes) <= 64 * 1024


def test_an_entry_failing_its_checksum_for_the_settle_time_is_damage_reported_once(tmp_path):
    file = log_file(tmp_path, 1, [create_txn(1, "/k", b"v0"), set_data_txn(2, "/k", b"v1", 1)])
    file.write_bytes(_torn(file, b"v1")[0])
    clock, damage = [0.0], []
    reader = LogReader(tmp_path, 0, damage.append, settle_s=1.0, now=lambda: clock[0])
    assert [t.zxid for t in reader.poll()] == [1]
    clock[0] += 1.5
    assert reader.poll() == [] and reader.poll() == []
    (found,) = damage
    assert found.file == file and "checksum" in found.reason


def test_a_torn_tail_behind_a_roll_over_is_reported_and_the_next_file_read(tmp_path):
    first = log_file(tmp_path, 1, [create_txn(1, "/k", b""), set_data_txn(2, "/k", b"x", 1)])
    raw = first.read_bytes().rstrip(b"\0")
    first.write_bytes(raw[:-10] + b"\0" * 64)  # the last entry cut short
    log_file(tmp_path, 2, [set_data_txn(2, "/k", b"x", 1), set_data_txn(3, "/k", b"y", 2)])
    damage = []
    assert [t.zxid for t in read_history(tmp_path, 0, damage.append)] == [1, 2, 3]
    assert len(damage) == 1 and "torn entry" in damage[0].reason


def test_logs_that_start_after_the_resume_point_are_a_gap(tmp_path):
    log_file(tmp_path, 100, [set_data_txn(100, "/k", b"x", 1)])
    with pytest.raises(HistoryGap, match="purged"):
        LogReader(tmp_path, 10, lambda d: None)
    reader = LogReader(tmp_path, 99, lambda d: None)
    assert [t.zxid for t in reader.poll()] == [100]
    reader.close()


def test_bad_input_to_the_txnlog_commands_is_one_line_and_exit_1(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["capture", "--source", "txnlog"])
    assert result.exit_code == 1 and "zk_data_dir: required" in result.output
    result = runner.invoke(main, ["events", "cat", "--from-txnlog", str(tmp_path)])
    assert result.exit_code == 1 and "holds no ZooKeeper data" in result.output
    result = runner.invoke(main, ["replay", str(tmp_path), "--from-txnlog", str(tmp_path),
                                  "--alerts-out", str(tmp_path / "a")])  # fmt: skip
    assert result.exit_code == 1 and "one of them" in result.output
    (tmp_path / "snapshot.0").write_bytes(snapshot_bytes(NODES))
    result = runner.invoke(main, ["events", "cat", "--from-txnlog", str(tmp_path), "--chroot",
                                  "/kafka"])  # fmt: skip
    assert result.exit_code == 1 and "no Kafka cluster id at /kafka/cluster/id" in result.output


def test_a_log_starting_a_new_leader_epoch_continues_the_last_one(tmp_path):
    """zxid = epoch << 32 | counter: a new leader's first transaction is not a gap."""
    epoch_2 = (2 << 32) | 1
    log_file(tmp_path, epoch_2, [set_data_txn(epoch_2, "/k", b"x", 1)])
    reader = LogReader(tmp_path, (1 << 32) | 0xFF, lambda d: None)
    assert [t.zxid for t in reader.poll()] == [epoch_2]
    reader.close()
    later = (2 << 32) | 5  # an epoch's transactions 1-4 purged: a gap
    log_file(tmp_path / "purged", later, [set_data_txn(later, "/k", b"x", 1)])
    with pytest.raises(HistoryGap):
        LogReader(tmp_path / "purged", (1 << 32) | 0xFF, lambda d: None)
