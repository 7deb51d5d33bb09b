"""Following `__cluster_metadata-0` as Kafka writes it: the batches after an offset, from the
segment that holds it, on through segment rolls; a file cut back (Raft truncating an
uncommitted tail) or deleted (retention) is noticed and reading starts again from the offset
still wanted.

Only whole batches are given; a batch being written is read on the next poll. Nothing here
knows what is committed: the source holds batches back until the quorum's high watermark
passes them, and checks with `still_there` that a batch it gives out is still in its file."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.metadata_dir import segment_files, snapshot_files
from zkcdc.capture.kraft.record_batches import Batch, BatchDamage, batches

_READ_LIMIT = 8 * 1024 * 1024  # bytes a poll reads at most: a turn stays short


Read = tuple[Path, Batch]  # a batch and the segment it was read from


class MetadataLogGap(CaptureError):
    """The log no longer holds the offset wanted: retention removed it while zkcdc was away."""


class MetadataLogFollower:
    def __init__(
        self, directory: Path, start_offset: int, on_damage: Callable[[BatchDamage], None]
    ) -> None:
        self.directory = directory
        self._on_damage = on_damage
        self._wanted = start_offset  # the first offset not yet handed out by `poll`
        self._segment: tuple[int, Path] | None = None
        self._file: int | None = None  # an open descriptor: a deleted file stays readable
        self._inode: int | None = None
        self._position = 0
        self._locate()

    @property
    def position(self) -> tuple[str, int]:
        name = self._segment[1].name if self._segment else "-"
        return name, self._position

    def restart_at(self, offset: int) -> None:
        """Reads again from `offset` (the batches after it were cut back)."""
        self._wanted = offset
        self._locate()

    def _locate(self) -> None:
        segments = segment_files(self.directory)
        holding = [s for s in segments if s[0] <= self._wanted]
        if not holding:
            if segments:
                raise MetadataLogGap(
                    f"the metadata log starts at offset {segments[0][0]}, after "
                    f"{self._wanted} wanted"
                )
            self._close()  # no segment yet: a log still being formatted
            return
        self._open(holding[-1])

    def _open(self, segment: tuple[int, Path]) -> None:
        self._close()
        try:
            self._file = os.open(segment[1], os.O_RDONLY)
        except FileNotFoundError:
            self._segment = None
            return
        self._segment = segment
        self._inode = os.fstat(self._file).st_ino
        self._position = 0

    def _close(self) -> None:
        if self._file is not None:
            os.close(self._file)
        self._file, self._segment, self._inode = None, None, None

    def poll(self) -> list[Read]:
        """The whole batches written since the last poll (those at or after the offset wanted),
        each with the segment it is in."""
        if self._file is None:
            self._locate()
            if self._file is None:
                return []
        assert self._segment is not None and self._file is not None
        size = os.fstat(self._file).st_size
        if size < self._position or self._replaced():
            self._locate()  # cut back (truncated) or replaced: read the segment again
            assert self._file is not None
            size = os.fstat(self._file).st_size
        out = self._read(size)
        while not out and self._position < size:
            before = self._position
            out = self._read(size)  # a chunk of skipped or damaged batches: read on
            if self._position == before:
                break  # damage with no way past it
        if not out and size == self._position:
            newer = [s for s in segment_files(self.directory) if s[0] > self._segment[0]]
            if newer and os.fstat(self._file).st_size == self._position:
                self._open(newer[0])  # rolled: this segment is complete and read
                out = self._read(os.fstat(self._file).st_size)
        return out

    def _replaced(self) -> bool:
        assert self._segment is not None
        try:
            return os.stat(self._segment[1]).st_ino != self._inode
        except FileNotFoundError:
            return False  # deleted by retention: what we hold open is still readable

    def _read(self, size: int) -> list[Read]:
        assert self._file is not None and self._segment is not None
        if size <= self._position:
            return []
        data = os.pread(self._file, min(size - self._position, _READ_LIMIT), self._position)
        out: list[Read] = []
        consumed = 0
        for read in batches(data):
            if isinstance(read, BatchDamage):
                read.position += self._position
                self._on_damage(read)
                if read.next_position is None:
                    break  # no way past it until it is rewritten
                consumed = read.next_position
                continue
            consumed = read.position + read.size
            if read.last_offset >= self._wanted:
                out.append((self._segment[1], _shifted(read, self._position)))
                self._wanted = read.last_offset + 1
        self._position += consumed
        return out

    def still_there(self, segment: Path, batch: Batch) -> bool:
        """Whether `batch` is still where it was read, unchanged (not cut back and rewritten).
        A segment deleted since is fine when a snapshot covers the batch: retention removes
        only what a snapshot holds, and snapshots hold only what is committed."""
        try:
            with segment.open("rb") as stream:
                stream.seek(batch.position)
                header = stream.read(21)
        except FileNotFoundError:
            return any(s.end_offset > batch.last_offset for s in snapshot_files(self.directory))
        if len(header) < 21:
            return False
        base_offset, _, _, _, crc = struct.unpack(">qiibI", header)
        return bool(base_offset == batch.base_offset and crc == batch.crc)

    def close(self) -> None:
        self._close()


def _shifted(batch: Batch, by: int) -> Batch:
    """The batch with its position in the file rather than in the bytes read."""
    return batch._replace(position=batch.position + by)
