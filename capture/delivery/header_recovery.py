"""The blocks of an event-log file whose container header is damaged.

The header carries the schema (several KB), so in a small log most of the bytes are header and
a few flipped bits there would lose the whole file. What a reader needs from it is found again
elsewhere: the 16-byte sync marker ends every block too, and the schema is one of the released
ones (`avro/history/`). The marker is the 16 bytes before a block whose own end is the same 16
bytes; the schema is the newest released version that decodes the first block whole (zkcdc's
blocks are zstd frames with a checksum, so a wrong schema fails rather than misreads)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import fastavro

from zkcdc.capture.encoding.avro_encoder import write_long
from zkcdc.ground.schema_files import released_versions

SYNC_SIZE = 16
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAGIC = b"Obj\x01"
_MOST_TRIES = 64  # candidate blocks tried before giving up on a file


@dataclass(frozen=True)
class Recovered:
    head: bytes  # a container header to read the blocks with
    sync: bytes
    first_block: int  # where the first block after the damage starts in the file
    metadata: dict[str, Any]
    version: int  # the released schema version that reads the blocks


def _long(data: Any, at: int) -> tuple[int, int] | None:
    """Avro's zig-zag varint at `at`: (value, offset after it), or None."""
    shift = value = 0
    for i in range(at, min(at + 10, len(data))):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), i + 1
        shift += 7
    return None


def _block_at(data: Any, at: int) -> tuple[int, int, int] | None:
    """(records, data start, data end) of a block header at `at`, if it is a plausible one."""
    count = _long(data, at)
    if count is None or count[0] <= 0:
        return None
    size = _long(data, count[1])
    if size is None or size[0] <= 0 or size[1] + size[0] + SYNC_SIZE > len(data):
        return None
    return count[0], size[1], size[1] + size[0]


def find_sync(data: Any, after: int) -> tuple[bytes, int] | None:
    """(sync marker, where the first block after `after` starts): the 16 bytes before a
    plausible block that ends with the same 16 bytes."""
    candidates: list[int] = []
    at = data.find(ZSTD_MAGIC, after)
    while at >= 0 and len(candidates) < _MOST_TRIES:
        candidates.append(at)
        at = data.find(ZSTD_MAGIC, at + 1)
    if not candidates:  # not zstd (an old `null`-codec log): the file's last 16 bytes
        tail = data[-SYNC_SIZE:]
        first = data.find(tail, after)
        if len(data) >= 2 * SYNC_SIZE and 0 <= first < len(data) - SYNC_SIZE:
            return tail, first + SYNC_SIZE
        return None
    sync = None
    for magic in candidates:
        for start, block in _blocks_before(data, magic, after):
            candidate = data[start - SYNC_SIZE : start]
            if data[block[2] : block[2] + SYNC_SIZE] == candidate:
                sync = candidate
                break
        if sync is not None:
            break
    if sync is None:
        return None
    # The first block whose end is the marker (the header's own marker may be the damage).
    for magic in candidates:
        for start, block in _blocks_before(data, magic, after):
            if data[block[2] : block[2] + SYNC_SIZE] == sync:
                return sync, start
    return None


def _blocks_before(data: Any, magic: int, after: int) -> list[tuple[int, tuple[int, int, int]]]:
    """The plausible block headers whose data starts at `magic` (two varints before it)."""
    out = []
    for header_len in range(2, 21):
        start = magic - header_len
        if start - SYNC_SIZE < after:
            break
        block = _block_at(data, start)
        if block is not None and block[1] == magic:
            out.append((start, block))
    return out


def container_head(schema: dict[str, Any], codec: bytes, sync: bytes) -> bytes:
    out = bytearray(MAGIC)
    meta = {b"avro.schema": json.dumps(schema).encode(), b"avro.codec": codec}
    write_long(len(meta), out)
    for key, value in meta.items():
        write_long(len(key), out)
        out += key
        write_long(len(value), out)
        out += value
    write_long(0, out)
    return bytes(out + sync)


def _reads(head: bytes, data: Any, start: int, reader_schema: Any) -> bool:
    """Whether the first block after `start` decodes whole with this header."""
    block = _block_at(data, start)
    if block is None:
        return False
    stream = io.BytesIO(head + data[start : block[2] + SYNC_SIZE])
    try:
        for found in fastavro.block_reader(stream, reader_schema):
            list(found)  # every record decodes, and they end where the block's data does
            rest: io.BytesIO = found.bytes_  # type: ignore[attr-defined]
            return len(rest.getbuffer()) == rest.tell()
    except Exception:  # a wrong schema fails to decode: try the next
        return False
    return False


def recover(data: Any, reader_schema: Any, after: int = len(MAGIC)) -> Recovered | None:
    """How to read the blocks of a file whose header is damaged, or None when no block and
    released schema can be found."""
    found = find_sync(data, after)
    if found is None:
        return None
    sync, start = found
    block = _block_at(data, start)
    if block is None or data[block[2] : block[2] + SYNC_SIZE] != sync:
        return None
    codec = b"zstandard" if data[block[1] : block[1] + 4] == ZSTD_MAGIC else b"null"
    for version, schema in reversed(released_versions("ChangeRecord")):
        head = container_head(schema, codec, sync)
        if _reads(head, data, start, reader_schema):
            metadata = {"avro.schema": json.dumps(schema), "avro.codec": codec.decode()}
            return Recovered(head, sync, start, metadata, version)
    return None
