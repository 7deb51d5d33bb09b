"""An event-log file read block by block, through damage: each damaged block is named (file and
block number) and skipped, and reading goes on after it, at the next sync marker.

Avro container files end every block with the file's 16-byte sync marker, which is what makes
reading on possible. Damage shows as a block whose marker is not where its size says, whose
data does not decode or does not end where its records do, or, in files written with the
`zstandard` codec (zkcdc's since the logs carried a checksum), whose data fails the frame's
checksum: a flipped bit inside a record, which the `null` codec would read silently as another
record."""

from __future__ import annotations

import mmap
import os
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

import fastavro

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

SYNC_SIZE = 16
# A digest of the header's schema and codec: a flipped bit there would rename a field for the
# whole file without any block failing its checksum.
META_DIGEST = "zkcdc.meta.crc32"
_ZSTD_OPTIONS: dict[int, int] = {
    int(zstd.CompressionParameter.compression_level): 1,
    int(zstd.CompressionParameter.checksum_flag): 1,
}


def compress(data: bytes) -> bytes:
    """One block's data as a zstd frame with its checksum (the `zstandard` codec's form)."""
    return zstd.compress(data, options=_ZSTD_OPTIONS)


def _meta_digest(schema: bytes, codec: bytes) -> bytes:
    return b"%08x" % zlib.crc32(codec, zlib.crc32(schema))


def header_metadata(schema: bytes, codec: bytes) -> dict[str, bytes]:
    return {"avro.schema": schema, "avro.codec": codec, META_DIGEST: _meta_digest(schema, codec)}


def _check_header(metadata: dict[str, Any]) -> None:
    """Raises for a header that fails its digest (or lost it: every zstandard file of zkcdc's
    has one); files of older versions (codec null, no digest) pass as they are."""

    def raw(key: str) -> bytes:
        value = metadata.get(key, b"")
        return value.encode() if isinstance(value, str) else bytes(value)

    digest = metadata.get(META_DIGEST)
    if digest is None:
        if raw("avro.codec") == b"zstandard":
            raise ValueError(f"header without its {META_DIGEST}")
        return
    if raw(META_DIGEST) != _meta_digest(raw("avro.schema"), raw("avro.codec")):
        raise ValueError("header metadata fails its checksum")


@dataclass(frozen=True)
class Damage:
    file: Path
    block: int
    reason: str

    def describe(self) -> str:
        return f"{self.file}: damaged at block {self.block}: {self.reason}"


OnDamage = Callable[[Damage], None]


def reason_of(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _Spliced:
    """The file's header followed by the file from `at` on: what fastavro reads to go on after
    a damaged block (its block reader cannot resume after an error)."""

    def __init__(self, head: bytes, file: BinaryIO, at: int) -> None:
        self._head, self._file, self._pos = head, file, 0
        file.seek(at)

    def read(self, size: int = -1) -> bytes:
        out = b""
        if self._pos < len(self._head):
            end = len(self._head) if size < 0 else min(len(self._head), self._pos + size)
            out = self._head[self._pos : end]
        rest = -1 if size < 0 else size - len(out)
        if rest:
            out += self._file.read(rest)
        self._pos += len(out)
        return out

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        target = {0: offset, 1: self._pos + offset}.get(whence)
        if target is None or target < len(self._head):
            raise OSError("a spliced event-log stream seeks forward within its file only")
        self._file.seek(self._file.tell() + target - self._pos)
        self._pos = target
        return target


def _next_sync(file: BinaryIO, sync: bytes, start: int) -> int | None:
    """The offset just past the first sync marker at or after `start`, or None."""
    try:
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
            found = view.find(sync, start)
    except (OSError, ValueError):
        return None
    return None if found < 0 else found + SYNC_SIZE


def blocks(
    file: Path, on_damage: OnDamage, reader_schema: Any | None = None
) -> Iterator[tuple[int, Any, dict[str, Any]]]:
    """(block number, fastavro block, the file's metadata) of each readable block, in order.
    Damage is reported to `on_damage` once per damaged stretch, then skipped."""
    for number, block, metadata, _ in located_blocks(file, on_damage, reader_schema):
        yield number, block, metadata


def located_blocks(
    file: Path, on_damage: OnDamage, reader_schema: Any | None = None, start: int | None = None
) -> Iterator[tuple[int, Any, dict[str, Any], int]]:
    """As `blocks`, each with the byte where the next block starts; from `start` on (such a
    byte given before) instead of the first block: reading goes on where it stopped, as the
    file grows, without reading the blocks before again. Block numbers then count from there."""
    try:
        raw = file.open("rb")
    except OSError as exc:
        on_damage(Damage(file, 0, f"cannot read: {exc.strerror}"))
        return
    with raw:
        try:
            if raw.read(4) != b"Obj\x01":
                raise ValueError("its first 4 bytes are not Avro's magic")
            raw.seek(0)
            reader = fastavro.block_reader(raw, reader_schema)
            sync = reader._header["sync"]
            _check_header(reader.metadata)
            head_end = raw.tell()
            raw.seek(0)
            head = raw.read(head_end)
            raw.seek(head_end)
            metadata = dict(reader.metadata)
            number, base, next_start, recovered = 0, 0, head_end, False
        except Exception as exc:
            found = _recovered(raw, reader_schema)
            tail = "" if found is None else (
                f"; its blocks read from byte {found.first_block} on with the released "
                f"schema v{found.version}"
            )  # fmt: skip
            on_damage(Damage(file, 0, f"no readable container header: {reason_of(exc)}{tail}"))
            if found is None:
                return
            head, sync, metadata = found.head, found.sync, dict(found.metadata)
            head_end = found.first_block
            number, base, next_start, recovered = 0, 0, head_end, True
            start = head_end if start is None or start < head_end else start
        if start is not None and (start > head_end or recovered):
            if start >= _size(raw):
                return
            base, next_start = start - len(head), start
            try:
                reader = fastavro.block_reader(cast(BinaryIO, _Spliced(head, raw, start)),
                                               reader_schema)  # fmt: skip
            except Exception as exc:
                on_damage(Damage(file, number, reason_of(exc)))
                return
        while True:
            try:
                for block in reader:
                    next_start = base + block.offset + block.size
                    yield number, block, metadata, next_start
                    number += 1
                return
            except Exception as exc:
                on_damage(Damage(file, number, reason_of(exc)))
            resume = _next_sync(raw, sync, next_start)
            if resume is None and not recovered:
                # The header's own sync marker may be the damage: found again, it reads on.
                found = _recovered(raw, reader_schema)
                if found is not None and found.sync != sync and found.first_block >= next_start:
                    head, sync, recovered = found.head, found.sync, True
                    resume = found.first_block
            if resume is None or resume >= _size(raw):
                return  # damaged up to its end (a torn last block)
            number += 1
            next_start = resume
            base = resume - len(head)
            try:
                spliced = cast(BinaryIO, _Spliced(head, raw, resume))
                reader = fastavro.block_reader(spliced, reader_schema)
            except Exception as exc:  # the header read before: only the file can have gone
                on_damage(Damage(file, number, reason_of(exc)))
                return


def _recovered(raw: BinaryIO, reader_schema: Any) -> Any:
    """How to read the blocks after a damaged header (`header_recovery`), or None."""
    from zkcdc.capture.delivery.header_recovery import recover

    try:
        with mmap.mmap(raw.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return recover(view, reader_schema)
    except (OSError, ValueError):  # an empty file cannot be mapped
        return None


def _size(file: BinaryIO) -> int:
    return os.fstat(file.fileno()).st_size


def block_records(block: Any) -> list[dict[str, Any]]:
    """A block's records, all or none: raises on a block that does not decode, or whose data
    does not end where its records do."""
    records = list(block)
    data = block.bytes_
    left = len(data.getbuffer()) - data.tell()
    if left:
        raise ValueError(f"{left} bytes after the block's {block.num_records} records")
    return records
