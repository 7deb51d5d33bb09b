"""The compiled batch walk (capture/kraft/_batch_walk.c) gives exactly what the Python reading
gives: the same batches and records, the same damage named at the same bytes, on real-shaped
segments and on fuzzed ones (garbage records under a valid CRC, cut tails, flipped bytes)."""

from __future__ import annotations

import gzip
import struct
from typing import Any

from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kraft_log_writer import leader_change, metadata_batch, record_bytes

from zkcdc.capture.kraft import record_batches
from zkcdc.capture.kraft.record_batches import Batch, BatchDamage, batches


def _both(data: bytes, start: int = 0) -> list[Any]:
    """What both readings give, asserted equal; damage compared by what it says and where."""

    def plain(read: Batch | BatchDamage) -> Any:
        if isinstance(read, BatchDamage):
            return ("damage", read.position, read.base_offset, read.problem, read.next_position)
        return read

    compiled = [plain(r) for r in batches(data, start)]
    python = [plain(r) for r in batches(data, start, use_compiled=False)]
    assert compiled == python
    return compiled


def _sealed(base_offset: int, count: int, body: bytes, attributes: int = 0) -> bytes:
    """A batch whose CRC matches whatever its records' bytes are."""
    after_crc = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 1_700_000_000_000,
                            1_700_000_000_005, -1, -1, -1, count) + body  # fmt: skip
    return (
        struct.pack(">qiibI", base_offset, 9 + len(after_crc), 3, 2, crc32c(after_crc)) + after_crc
    )


def _config(offset: int, i: int) -> bytes:
    fields = {"ResourceType": 2, "ResourceName": f"topic-{i % 20}", "Name": "retention.ms",
              "Value": str(86_400_000 + i)}  # fmt: skip
    return metadata_batch(offset, 3, [(4, 0, fields), (20, 0, {})][: 1 + i % 2])


def _segment(n: int) -> bytes:
    out, offset = bytearray(), 0
    for i in range(n):
        out += _config(offset, i)
        offset += 1 + i % 2
    return bytes(out)


def test_the_compiled_walk_is_built_by_the_install() -> None:
    # setup.py builds it wherever a C compiler is, as on this project's machines.
    assert record_batches.compiled_walk is not None


def test_a_segment_of_many_chunks_reads_the_same_compiled_and_in_python() -> None:
    data = _segment(1_000)  # several of the compiled walk's chunks
    read = _both(data)
    assert len(read) == 1_000
    assert [r.base_offset for r in read][:4] == [0, 1, 3, 4]
    assert sum(len(r.records) for r in read) == 1_500
    assert read[1].records[1].offset == 2 and read[1].records[1].key is None


def test_control_batches_keys_and_timestamps_read_the_same() -> None:
    keyed = _sealed(7, 1, record_bytes(0, 42, b"key", b"value"))
    data = leader_change(0, 2, 1, [1, 2, 3]) + keyed + _config(8, 0)
    read = _both(data)
    assert read[0].control and not read[1].control
    assert read[1].records[0].key == b"key" and read[1].records[0].timestamp_ms == 1_700_000_000_042


def test_damage_compression_and_a_cut_tail_are_left_to_python_and_named_the_same() -> None:
    flipped = bytearray(_config(1, 0))
    flipped[-3] ^= 0x01  # CRC no longer matches
    body = record_bytes(0, 0, None, b"zipped")
    zipped = _sealed(2, 1, gzip.compress(body), attributes=1)
    snappy = _sealed(3, 1, body, attributes=2)
    tail = _config(4, 1)
    data = _config(0, 0) + bytes(flipped) + zipped + snappy + _config(4, 1) + tail[:30]
    read = _both(data)
    kinds = ["batch" if isinstance(r, Batch) else r[0] for r in read]
    assert kinds == ["batch", "damage", "batch", "damage", "batch"]
    assert read[2].records[0].value == b"zipped"


def test_a_start_inside_the_data_and_preallocated_zeros_read_the_same() -> None:
    data = _segment(10)
    second = len(_config(0, 0))
    assert _both(data + bytes(4096), second)[0].base_offset == 1
    assert _both(bytes(100)) == []


@settings(max_examples=300)
@given(st.binary(max_size=120), st.integers(0, 4), st.integers(-2, 6))
def test_fuzz_garbage_records_under_a_valid_crc_read_the_same(
    body: bytes, before: int, count: int
) -> None:
    data = _segment(before) + _sealed(50, count, body) + _config(60, 0)
    _both(data)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 3),
                          st.one_of(st.none(), st.binary(max_size=5)),
                          st.binary(max_size=40)), max_size=4),
       st.integers(-1, 2))  # fmt: skip
def test_fuzz_well_formed_records_with_a_wrong_count_read_the_same(
    records: list[tuple[int, int, bytes | None, bytes]], extra: int
) -> None:
    body = b"".join(record_bytes(o, t, k, v) for o, t, k, v in records)
    read = _both(_sealed(9, len(records) + extra, body))
    if extra == 0:
        assert isinstance(read[0], Batch) and len(read[0].records) == len(records)


@settings(max_examples=300)
@given(st.integers(0, 3_000), st.integers(0, 255), st.integers(0, 3_100))
def test_fuzz_a_byte_changed_or_the_file_cut_reads_the_same(at: int, value: int, cut: int) -> None:
    data = bytearray(_segment(30))
    data[at % len(data)] = value
    _both(bytes(data[:cut]))
