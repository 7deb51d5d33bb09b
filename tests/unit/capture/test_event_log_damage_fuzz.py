"""A damaged event log never stops a reader and is never read as other records: any bit flipped
or any tail cut off, the damaged block is named (file and block), skipped, and the blocks after
it are read; every record that is read is one that was written. Older logs (codec null, no
checksum) are read the same way, without the guarantee against silently changed records."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.capture.delivery.event_log import EventLogWriter, read_records, read_spans, scan_blocks
from zkcdc.capture.delivery.log_blocks import Damage
from zkcdc.capture.encoding.avro_codec import load_schema
from zkcdc.capture.records import ChangeRecord, ClusterEvent, Znode
from zkcdc.ground.change_types import EventType, Op

BLOCKS, PER_BLOCK = 6, 5


def _record(seq: int) -> dict[str, Any]:
    data = os.urandom(40) + b'{"version":1,"leader":1}'
    event = ClusterEvent(type=EventType.ISR_SHRUNK, topic="t", partition=seq % 3, isr_after=(1, 2))
    return ChangeRecord("c1", seq, Op.UPDATE, f"/brokers/topics/t/partitions/{seq % 3}/state",
                        Znode(data, 1, 2, 3), Znode(data[::-1], 2, 2, 4), 4, seq, seq,
                        events=(event,)).to_avro()  # fmt: skip


def _log(folder: Path) -> tuple[Path, list[dict[str, Any]], list[tuple[int, int]]]:
    """A log file of BLOCKS blocks, its records, and each block's byte range (with its sync)."""
    written = [_record(seq) for seq in range(1, BLOCKS * PER_BLOCK + 1)]
    writer = EventLogWriter(folder, "c1", now=lambda: 0.0)
    for b in range(BLOCKS):
        writer.append(written[b * PER_BLOCK : (b + 1) * PER_BLOCK])
    writer.close()
    (file,) = folder.iterdir()
    with file.open("rb") as stream:
        ranges = [
            (block.offset, block.offset + block.size) for block in fastavro.block_reader(stream)
        ]
    return file, written, ranges


@pytest.fixture(scope="module")
def pristine(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[bytes, list[dict[str, Any]], list[tuple[int, int]]]:
    file, written, ranges = _log(tmp_path_factory.mktemp("pristine"))
    return file.read_bytes(), written, ranges


def _read(data: bytes, folder: Path) -> tuple[list[dict[str, Any]], list[Damage]]:
    folder.mkdir(exist_ok=True)
    file = folder / "c1.00000000000000000001.avro"
    file.write_bytes(data)
    damage: list[Damage] = []
    records = list(read_records(file, damage.append))
    # The other readers take the same file without an exception either.
    scan_blocks(file)
    for _ in read_spans(file, lambda d: None):
        pass
    return records, damage


def _assert_only_written(records: list[dict[str, Any]], written: list[dict[str, Any]]) -> None:
    by_seq = {r["seq"]: r for r in written}
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(set(seqs)), "records out of order or twice"
    for r in records:
        assert r == by_seq.get(r["seq"]), f"seq {r['seq']} read back as another record"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(position=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_a_flipped_bit_is_damage_named_at_its_block_never_another_record(
    pristine: Any, tmp_path: Path, position: int, bit: int
) -> None:
    data, written, ranges = pristine
    position %= len(data)
    flipped = bytearray(data)
    flipped[position] ^= 1 << bit
    records, damage = _read(bytes(flipped), tmp_path / f"f{position}-{bit}")
    _assert_only_written(records, written)
    if len(records) < len(written):
        assert damage, "records went missing without a word"
    hit = [b for b, (start, end) in enumerate(ranges) if start <= position < end]
    if hit:  # inside a block (not the header): that block, and only around it, is lost
        # A bit no reader looks at (zstd's unused frame-header bit) changes nothing: no damage,
        # every record read back as written (checked above).
        assert not damage or damage[0].block == hit[0], (damage, hit)
        lost = {r["seq"] for r in written} - {r["seq"] for r in records}
        assert lost <= set(range(hit[0] * PER_BLOCK + 1, (hit[0] + 2) * PER_BLOCK + 1))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(cut=st.integers(min_value=0), tail=st.binary(max_size=40))
def test_a_torn_or_garbled_tail_keeps_every_whole_block_before_it(
    pristine: Any, tmp_path: Path, cut: int, tail: bytes
) -> None:
    data, written, ranges = pristine
    cut %= len(data) + 1
    records, damage = _read(data[:cut] + tail, tmp_path / f"t{cut}-{len(tail)}")
    _assert_only_written(records, written)
    whole = sum(1 for _, end in ranges if end <= cut)
    assert len(records) >= whole * PER_BLOCK
    # Cut at a block's end (or inside the header's sync marker, then ending with the header):
    # a shorter log, as a file closed there would be; nothing is left to call damaged.
    header_end = ranges[0][0]
    clean = not tail and cut in {header_end} | {end for _, end in ranges}
    clean |= cut + len(tail) == header_end and len(tail) <= 16
    if len(records) < len(written) and cut < len(data) and not clean:
        assert damage


@pytest.fixture(scope="module")
def older_log() -> tuple[bytes, list[dict[str, Any]]]:
    """A log as releases before the checksummed blocks wrote it: codec null, no digest."""
    buffer = io.BytesIO()
    written = [_record(seq) for seq in range(1, 21)]
    fastavro.writer(buffer, load_schema(), written, codec="null", sync_interval=200)
    return buffer.getvalue(), written


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(position=st.integers(min_value=0), value=st.integers(min_value=0, max_value=255))
def test_an_older_null_codec_log_with_any_byte_changed_never_stops_a_reader(
    older_log: Any, tmp_path: Path, position: int, value: int
) -> None:
    pristine_data, written = older_log
    data = bytearray(pristine_data)
    data[position % len(data)] = value  # a union index, a length, a sync byte: anything
    records, damage = _read(bytes(data), tmp_path / f"n{position}-{value}")
    assert len(records) <= len(written)
    if len(records) < len(written):
        assert damage


def test_the_block_after_a_damaged_one_is_read_and_the_damaged_one_is_named(tmp_path: Path) -> None:
    file, _, ranges = _log(tmp_path / "log")
    data = bytearray(file.read_bytes())
    start, end = ranges[3]
    data[(start + end) // 2] ^= 0x10  # inside block 3's data: its checksum fails
    file.write_bytes(bytes(data))
    damage: list[Damage] = []
    seqs = [r["seq"] for r in read_records(file, damage.append)]
    assert [d.block for d in damage] == [3]
    assert "checksum" in damage[0].reason
    assert seqs == [s for s in range(1, 31) if not 16 <= s <= 20]


def _damaged_at(pristine: Any, tmp_path: Path, position: int, bits: int = 0b101) -> Any:
    data, written, ranges = pristine
    flipped = bytearray(data)
    flipped[position] ^= bits
    return _read(bytes(flipped), tmp_path), written, ranges


@pytest.mark.parametrize("where", ["magic", "schema", "codec", "digest", "sync"])
def test_a_damaged_header_loses_no_block_after_it_and_is_named(
    pristine: Any, tmp_path: Path, where: str
) -> None:
    data, written, ranges = pristine
    header_end = ranges[0][0]
    position = {
        "magic": 1,
        "schema": data.index(b'"fields"') + 3,
        "codec": data.index(b"zstandard") + 2,
        "digest": data.index(b"zkcdc.meta.crc32") + len(b"zkcdc.meta.crc32") + 3,
        "sync": header_end - 5,
    }[where]
    (records, damage), written, _ = _damaged_at(pristine, tmp_path, position)
    assert records == written  # every block, every record, as written
    assert damage and damage[0].block == 0
    assert "header" in damage[0].reason or where == "sync", damage


@pytest.mark.parametrize("region", ["count", "size", "body", "sync marker"])
def test_damage_in_each_region_of_a_block_loses_that_block_only_and_is_named(
    pristine: Any, tmp_path: Path, region: str
) -> None:
    _, written, ranges = pristine
    start, end = ranges[2]
    position = {"count": start, "size": start + 1, "body": (start + end) // 2,
                "sync marker": end - 4}[region]  # fmt: skip
    (records, damage), written, _ = _damaged_at(pristine, tmp_path, position, 0b1000000)
    _assert_only_written(records, written)
    assert damage and damage[0].block == 2, damage
    lost = {r["seq"] for r in written} - {r["seq"] for r in records}
    assert lost and lost <= set(range(2 * PER_BLOCK + 1, 4 * PER_BLOCK + 1)), sorted(lost)
