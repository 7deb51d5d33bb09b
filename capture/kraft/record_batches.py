"""Kafka's record batches (magic 2) as they lie in a log segment or a snapshot file.

A batch: baseOffset int64, length int32 (of what follows it), partitionLeaderEpoch int32,
magic int8, crc uint32 (CRC32C of everything after it), attributes int16, lastOffsetDelta int32,
baseTimestamp int64, maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence
int32, then the records (a count, and each one varint-framed). A batch whose CRC does not match
is damaged: it is named, never read. A batch cut short at the end of a file is a write in
progress (or a crash in the middle of one): nothing of it is given out."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

import crc32c

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.message_reader import MessageError, uvarint

compiled_walk: Callable[[bytes, int, int, type, type], tuple[list[Batch], int]] | None
try:  # the clean batches read in C (B7); built by `pip install` where a C compiler is
    from zkcdc.capture.kraft._batch_walk import walk as compiled_walk
except ImportError:  # none was: the same reading, in Python only
    compiled_walk = None

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset and length: the part `length` does not count
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_CRC_START = 21  # the CRC covers the batch from attributes on

_WALK_CHUNK = 256  # batches a call of the compiled walk: a big file is not read into one list

COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class BatchDamage(CaptureError):
    """A batch that cannot be read: bad CRC, impossible length, unknown magic or codec."""

    def __init__(
        self, position: int, base_offset: int | None, problem: str, next_position: int | None = None
    ) -> None:
        self.position = position
        self.next_position = next_position  # where reading goes on; None: nowhere
        self.base_offset = base_offset
        self.problem = problem
        at = f"offset {base_offset}" if base_offset is not None else "unknown offset"
        super().__init__(f"batch at byte {position} ({at}): {problem}")


class Record(NamedTuple):
    """A tuple: a batch holds hundreds, and a frozen dataclass costs several times more to make."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


class Batch(NamedTuple):
    """A tuple, as `Record`: the controller writes a batch for every one or two records."""

    position: int  # the byte in its file where it starts
    size: int  # its bytes in the file
    base_offset: int
    last_offset: int
    epoch: int  # partitionLeaderEpoch: the Raft epoch of the leader that wrote it
    crc: int
    max_timestamp_ms: int
    control: bool
    records: tuple[Record, ...]

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


# What a NamedTuple's own __new__ calls: made directly, a Python call less a record (B7).
_new = tuple.__new__


def _varint(b: bytes, p: int) -> tuple[int, int]:
    """A zig-zag varint (Kafka's record fields); most are one byte."""
    byte = b[p]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), p + 1
    value, p = uvarint(b, p)
    return (value >> 1) ^ -(value & 1), p


def _records(
    body: bytes, count: int, base_offset: int, base_ts: int, p: int = 0, stop: int | None = None
) -> tuple[Record, ...]:
    """The `count` records of `body[p:stop]` (the batch's part after its header): read in
    place, without copying the batch first."""
    stop = len(body) if stop is None else stop
    out = []
    for _ in range(count):
        # A record's length is mostly two bytes (64 to 8,191 bytes): read those inline too.
        byte = body[p]
        if byte < 0x80:
            length, p = (byte >> 1) ^ -(byte & 1), p + 1
        elif body[p + 1] < 0x80:
            raw = (byte & 0x7F) | (body[p + 1] << 7)
            length, p = (raw >> 1) ^ -(raw & 1), p + 2
        else:
            length, p = _varint(body, p)
        end = p + length
        p += 1  # attributes (unused)
        # Timestamp and offset deltas are mostly one byte each: read those inline.
        byte = body[p]
        if byte < 0x80:
            ts_delta, p = (byte >> 1) ^ -(byte & 1), p + 1
        else:
            ts_delta, p = _varint(body, p)
        byte = body[p]
        if byte < 0x80:
            offset_delta, p = (byte >> 1) ^ -(byte & 1), p + 1
        else:
            offset_delta, p = _varint(body, p)
        byte = body[p]
        if byte == 1:  # -1: no key, as metadata records have
            key, p = None, p + 1
        else:
            key_len, p = _varint(body, p)
            key = None if key_len < 0 else body[p : p + key_len]
            p += max(key_len, 0)
        byte = body[p]
        if byte < 0x80:
            value_len, p = (byte >> 1) ^ -(byte & 1), p + 1
        elif body[p + 1] < 0x80:
            raw = (byte & 0x7F) | (body[p + 1] << 7)
            value_len, p = (raw >> 1) ^ -(raw & 1), p + 2
        else:
            value_len, p = _varint(body, p)
        if end > stop or p + value_len > end:
            raise ValueError("a record runs past its batch")
        value = None if value_len < 0 else body[p : p + value_len]
        p = end  # headers: the metadata log writes none we need
        out.append(_new(Record, (base_offset + offset_delta, base_ts + ts_delta, key, value)))
    if p != stop:
        raise ValueError(f"{stop - p} byte(s) after the last record")
    return tuple(out)


def parse_batch(data: bytes, position: int = 0, view: memoryview | None = None) -> Batch:
    """The batch that starts at `position` of `data`, which must hold all of it (`view`: a
    memoryview of `data`, made once by a caller reading many batches)."""
    (base_offset, length, epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
     _pid, _pepoch, _seq, count) = HEADER.unpack_from(data, position)  # fmt: skip
    size = LOG_OVERHEAD + length
    if magic != 2:
        raise BatchDamage(position, base_offset, f"magic {magic} (only 2 is known)")
    end = position + size
    if view is None:
        view = memoryview(data)
    if crc32c.crc32c(view[position + _CRC_START : end]) != crc:
        raise BatchDamage(position, base_offset, "CRC32C does not match")
    codec = attributes & 0x07
    body, start, stop = data, position + HEADER_SIZE, end
    if codec == 1:
        body, start, stop = gzip.decompress(data[start:end]), 0, None
    elif codec != 0:
        name = COMPRESSION.get(codec, str(codec))
        raise BatchDamage(position, base_offset, f"compressed with {name}: not supported")
    try:
        records = _records(body, count, base_offset, base_ts, start, stop)
    except (ValueError, IndexError, MessageError) as exc:
        raise BatchDamage(position, base_offset, f"records unreadable: {exc}") from exc
    return _new(Batch, (position, size, base_offset, base_offset + last_delta, epoch, crc, max_ts,
                        attributes & 0x20 != 0, records))  # fmt: skip


def batches(
    data: bytes, start: int = 0, use_compiled: bool = True
) -> Iterator[Batch | BatchDamage]:
    """Every whole batch of `data` from byte `start`, damaged ones as `BatchDamage` (and
    skipped by their length where the length is sane). Stops before an incomplete tail: the
    caller reads on from `next_position` once more is written. `use_compiled=False`: Python's
    reading only (the compiled walk's tests compare the two)."""
    position = start
    total = len(data)
    view = memoryview(data)
    head = _OFFSET_AND_LENGTH.unpack_from
    walk = compiled_walk if use_compiled else None
    while position + LOG_OVERHEAD <= total:
        if walk is not None:
            # The compiled walk takes the clean batches and stops at anything else (damage,
            # compression, the end), which is then read here, named as it is below.
            clean, position = walk(data, position, _WALK_CHUNK, Batch, Record)
            yield from clean
            if len(clean) == _WALK_CHUNK or position + LOG_OVERHEAD > total:
                continue
        base_offset, length = head(data, position)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            if length == 0 and base_offset == 0:
                return  # preallocated zeros: the end of what is written
            yield BatchDamage(position, base_offset, f"length {length} is impossible")
            return  # no way to find the next batch
        end = position + LOG_OVERHEAD + length
        if end > total:
            return  # still being written
        try:
            yield parse_batch(data, position, view)
        except BatchDamage as damage:
            damage.next_position = end
            yield damage
        position = end
