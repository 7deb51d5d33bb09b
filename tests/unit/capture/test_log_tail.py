"""The event log read on from a seq while it grows (what Kafka has not taken yet): every record
after the seq once, in order, across rotated files; reading on after the end costs only the new
blocks; finding the start decodes one block, not the file before it. And the writer cuts a big
append into blocks of bounded size, never between two records of one position."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcdc.capture.delivery import log_blocks
from zkcdc.capture.delivery.event_log import (
    BLOCK_RECORDS,
    Damage,
    EventLogWriter,
    block_bounds,
    log_files,
    read_records,
)
from zkcdc.capture.delivery.log_tail import LogTail
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.ground.change_types import Op


def _records(first: int, count: int, zxid_every: int = 1) -> list[dict[str, Any]]:
    return [
        ChangeRecord("c1", seq, Op.UPDATE, f"/x/{seq % 7}", Znode(b"v" * 40, 1),
                     Znode(b"w" * 40, 2), seq // zxid_every, seq, seq).to_avro()
        for seq in range(first, first + count)
    ]  # fmt: skip


def _no_damage(damage: Damage) -> None:
    raise AssertionError(f"damage reported: {damage.describe()}")


def _writer(directory: Path, max_bytes: int = 64 * 1024 * 1024) -> EventLogWriter:
    return EventLogWriter(directory, "c1", now=lambda: 0.0, max_bytes=max_bytes, fsync=False)


@settings(max_examples=40, deadline=None)
@given(
    appends=st.lists(st.integers(1, 2_500), min_size=1, max_size=8),
    after_share=st.floats(0, 1),
    limit=st.integers(1, 3_000),
    rotate_kib=st.sampled_from([8, 64, 100_000]),
)
def test_a_tail_gives_every_record_after_its_seq_once_in_order_as_the_log_grows(
    tmp_path_factory: pytest.TempPathFactory,
    appends: list[int],
    after_share: float,
    limit: int,
    rotate_kib: int,
) -> None:
    directory = tmp_path_factory.mktemp("events")
    writer = _writer(directory, max_bytes=rotate_kib * 1024)
    half = len(appends) // 2
    logged = 0
    for count in appends[:half]:
        writer.append(_records(logged + 1, count))
        logged += count
    after = int(after_share * logged)
    tail = LogTail(directory, "c1", after, _no_damage)
    got = [r["seq"] for r in tail.take(limit)]
    for count in appends[half:]:  # written while the tail reads on
        writer.append(_records(logged + 1, count))
        logged += count
        got += [r["seq"] for r in tail.take(limit)]
    while batch := tail.take(limit):
        got += [r["seq"] for r in batch]
    assert got == list(range(after + 1, logged + 1))
    assert tail.take(limit) == []
    tail.close()


def test_reading_on_after_the_end_decodes_only_the_new_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _writer(tmp_path)
    writer.append(_records(1, 20 * BLOCK_RECORDS))
    decoded: list[int] = []
    real = log_blocks.block_records

    def counting(block: Any) -> list[dict[str, Any]]:
        decoded.append(block.num_records)
        return real(block)

    monkeypatch.setattr(log_blocks, "block_records", counting)
    tail = LogTail(tmp_path, "c1", 0, _no_damage)
    while tail.take(5_000):
        pass
    assert sum(decoded) == 20 * BLOCK_RECORDS, "a block was decoded twice"
    decoded.clear()
    writer.append(_records(20 * BLOCK_RECORDS + 1, 10))
    assert [r["seq"] for r in tail.take(100)] == list(range(20_001, 20_011))
    assert decoded == [10], "reading on read the file again"


def test_finding_the_start_decodes_one_block_not_the_file_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _writer(tmp_path)
    for first in range(1, 50 * BLOCK_RECORDS, 5 * BLOCK_RECORDS):
        writer.append(_records(first, 5 * BLOCK_RECORDS))
    decoded: list[int] = []
    real = log_blocks.block_records

    def counting(block: Any) -> list[dict[str, Any]]:
        decoded.append(block.num_records)
        return real(block)

    monkeypatch.setattr(log_blocks, "block_records", counting)
    tail = LogTail(tmp_path, "c1", 41_234, _no_damage)
    assert tail.take(3)[0]["seq"] == 41_235
    assert sum(decoded) <= 2 * BLOCK_RECORDS


def test_a_big_append_is_cut_into_blocks_never_between_records_of_one_zxid(
    tmp_path: Path,
) -> None:
    writer = _writer(tmp_path)
    records = _records(1, 5_500, zxid_every=300)  # 300 records a transaction
    writer.append(records)
    (file,) = log_files(tmp_path)
    sizes, firsts = [], []
    for _, block, _ in log_blocks.blocks(file, _no_damage):
        got = log_blocks.block_records(block)
        sizes.append(len(got))
        firsts.append(got[0])
    assert len(sizes) > 1 and max(sizes) < BLOCK_RECORDS + 300
    assert all(first["seq"] % 300 == 0 or first["seq"] == 1 for first in firsts)
    assert [r["seq"] for r in read_records(file)] == list(range(1, 5_501))


def test_records_without_a_position_are_cut_anywhere() -> None:
    records = [{"zxid": None} for _ in range(2_500)]
    assert block_bounds(records) == [(0, 1_000), (1_000, 2_000), (2_000, 2_500)]
    same = [{"zxid": 7} for _ in range(2_500)]
    assert block_bounds(same) == [(0, 2_500)]
