"""The event log: change records in Avro object container files, rotated by size and age.

Files are named `<cluster>.<first seq, 20 digits>.avro`, so a folder lists each cluster's files
in `seq` order. Each batch is written and fsynced as one container block: a killed daemon or a
power loss leaves at most a torn last block, which readers report and skip."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from zkcdc.capture import failpoints
from zkcdc.capture.delivery import log_blocks
from zkcdc.capture.delivery.log_blocks import Damage as Damage
from zkcdc.capture.delivery.log_blocks import reason_of
from zkcdc.capture.encoding import compiled_schema
from zkcdc.capture.encoding.avro_encoder import compile_encoder, write_long
from zkcdc.capture.errors import CaptureError
from zkcdc.ground.private_files import fsync_directory, safe_name

SUFFIX = ".avro"
MAGIC = b"Obj\x01"
# Each block a zstd frame with its content checksum: damage inside a record is found, not read
# as another record. Standard Avro: fastavro, Spark (avro-java with zstd-jni) read it.
CODEC = b"zstandard"


class EventLogError(CaptureError):
    """An event log cannot be written or read."""


# Records a block: a reader decodes a block in one call that holds Python's lock throughout (a
# snapshot of 400,000 znodes in one block starved a capture's kazoo pings for 10 s).
BLOCK_RECORDS = 1_000


def block_bounds(records: list[dict[str, Any]], size: int = BLOCK_RECORDS) -> list[tuple[int, int]]:
    """Where an append's records are cut into blocks: about `size` records each, never between
    two records of one zxid (one transaction, one metadata offset), so a block torn by a crash
    never leaves half of a position's records for a restart to continue after."""
    bounds, start = [], 0
    while start < len(records):
        end = min(start + size, len(records))
        while end < len(records) and _same_position(records[end - 1], records[end]):
            end += 1
        bounds.append((start, end))
        start = end
    return bounds


def _same_position(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["zxid"] is not None and a["zxid"] == b["zxid"]


def file_name(cluster: str, first_seq: int) -> str:
    return f"{safe_name(cluster)}.{first_seq:020d}{SUFFIX}"


def cluster_of(file: Path) -> str:
    """The (file-safe) cluster name a log file belongs to, from its name."""
    return file.name.split(".")[0]


def first_seq(file: Path) -> int | None:
    """The seq a log file starts at, from its name."""
    parts = file.name.split(".")
    digits = parts[-2][:20] if len(parts) >= 3 else ""
    return int(digits) if digits.isdigit() else None


def log_files(path: Path, cluster: str | None = None) -> list[Path]:
    """The container files of a log: the file itself, or a folder's files in `seq` order
    (only one cluster's, if given)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise EventLogError(f"no event log at {path}")
    prefix = f"{safe_name(cluster)}." if cluster is not None else ""
    # Recursive, so a capture state folder (one sub-folder per cluster) reads as a whole.
    return sorted(
        p
        for p in path.rglob(f"*{SUFFIX}")
        if p.name.startswith(prefix) and first_seq(p) is not None and p.is_file()
    )


class EventLogWriter:
    """Appends batches of records (in blocks of about `BLOCK_RECORDS`, written at once), durable
    before `append` returns (fsync): the daemon hands records to Kafka and moves its checkpoints
    only past what the log holds for good. An append that cannot be written whole is cut off
    again, so a failed append leaves the file as it was. A new file when the current one is too big or too old."""

    def __init__(
        self,
        directory: Path,
        cluster: str,
        *,
        max_bytes: int = 64 * 1024 * 1024,
        max_age_s: float = 3600.0,
        now: Callable[[], float],
        fsync: bool = True,
    ) -> None:
        self.directory = directory
        self.cluster = cluster
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.fsync = fsync
        self._now = now
        text = compiled_schema.current_text()
        self._encode = compiled_schema.sized_encoder(text)
        # The container header's metadata, an Avro map<bytes>: the same for every file.
        self._header_meta = compile_encoder({"type": "map", "values": "bytes"})(
            log_blocks.header_metadata(compiled_schema.normalized(text).encode(), CODEC)
        )
        self._fd: int | None = None
        self._path: Path | None = None
        self._sync = b""
        self._opened_at = 0.0
        self._size = 0  # of the current file: tell() on every append costs a system call
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EventLogError(
                f"cannot create event log folder {directory}: {exc.strerror}"
            ) from exc

    def encode(self, record: dict[str, Any]) -> bytes:
        """A record's Avro bytes as the log holds them (the same as a single-object body)."""
        return self._encode(record)

    def append(self, records: list[dict[str, Any]], encoded: list[bytes] | None = None) -> None:
        """Appends one block; `encoded`, if given, is the records' bytes already (`encode`).
        Raises EventLogError with nothing of the block left in the file."""
        if not records:
            return
        if self._fd is None or self._due_for_rotation():
            self._rotate(records[0]["seq"])
        assert self._fd is not None
        if encoded is None:
            encoded = [self._encode(r) for r in records]
        block = bytearray()  # the blocks of this append, written (and undone) as one
        for start, end in block_bounds(records):
            body = log_blocks.compress(b"".join(encoded[start:end]))
            write_long(end - start, block)
            write_long(len(body), block)
            block += body
            block += self._sync
        try:
            failpoints.hit("event_log.write")
            _write_all(self._fd, block)
            failpoints.hit("event_log.fsync")
            if self.fsync:
                os.fdatasync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise EventLogError(f"cannot write the event log {self._path}: {exc.strerror}") from exc
        self._size += len(block)

    def _cut_back(self) -> None:
        """Removes what a failed append left after the last whole block (a full disk writes
        part of it; a failed fsync leaves its pages in doubt). If even that fails, the file is
        closed: readers will name its torn end, and the next append starts a new file."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._size)
            if self.fsync:
                os.fdatasync(self._fd)
        except OSError:
            self.close()

    def _due_for_rotation(self) -> bool:
        return self._size >= self.max_bytes or self._now() - self._opened_at >= self.max_age_s

    def _rotate(self, first_seq: int) -> None:
        self.close()
        path = self.directory / file_name(self.cluster, first_seq)
        # A file of that name is what a run that failed or crashed left for the same seq, none
        # of whose records counted (or the state would be past them): kept aside for a look,
        # out of the log (a name of its own would sort before it and be read as older).
        if path.exists():
            aside = path.with_name(f"{path.name}.replaced-{os.getpid()}")
            try:
                path.rename(aside)
            except OSError as exc:
                raise EventLogError(f"cannot move {path} aside: {exc.strerror}") from exc
        header = MAGIC + self._header_meta + os.urandom(16)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        except OSError as exc:
            raise EventLogError(f"cannot create {path}: {exc.strerror}") from exc
        try:
            _write_all(fd, header)
            if self.fsync:
                os.fdatasync(fd)
                fsync_directory(self.directory)  # the new name survives a power loss too
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()  # a header alone holds nothing; a torn one would read as damage
            raise EventLogError(f"cannot write {path}: {exc.strerror}") from exc
        self._fd, self._path, self._sync = fd, path, header[-16:]
        self._size = len(header)
        self._opened_at = self._now()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = None


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@dataclass(frozen=True)
class BlockScan:
    records: int  # in the readable blocks
    damaged: list[Damage]  # each damaged stretch of each file
    # Per cluster, the distinct paths its records name, each count stopped at the scan's
    # `count_paths` (0: not counted); None when a block of another schema version was not split.
    paths: dict[str, int] | None = None


def scan_blocks(path: Path, count_paths: int = 0) -> BlockScan:
    """Reads a log's blocks without decoding every field of their records: how many records
    the readable blocks hold, and where files are damaged. A block of the current schema is
    split into its records (what replay reads), so one that does not hold what its header
    counts is found here too. With `count_paths`, also how many distinct paths each cluster's
    records name, up to that many (a replay's layout follows the cluster's size)."""
    records, damaged = 0, list[Damage]()
    text = compiled_schema.current_text()
    # Strings cost more to split off than a number: the paths only when they are counted.
    split = compiled_schema.splitter(text, ("cluster", "path") if count_paths else ("seq",))
    current = compiled_schema.normalized(text)
    seen: dict[str, set[int]] | None = {} if count_paths else None  # None: not counted
    for file in log_files(path):
        for number, block, metadata in log_blocks.blocks(file, damaged.append):
            if _same_schema(metadata, current):
                try:
                    parts = split(block.bytes_.getvalue(), block.num_records)
                except Exception as exc:
                    damaged.append(Damage(file, number, reason_of(exc)))
                    continue
                if seen is not None:
                    _count_paths(parts, seen, count_paths)
            else:
                seen = None
            records += block.num_records
    paths = None if seen is None else {c: len(hashes) for c, hashes in seen.items()}
    return BlockScan(records, damaged, paths)


def _count_paths(parts: list[tuple[Any, ...]], seen: dict[str, set[int]], limit: int) -> None:
    # Hashes, not the paths: a set of two million paths would cost hundreds of megabytes.
    for cluster, record_path, _ in parts:
        hashes = seen.get(cluster)
        if hashes is None:
            hashes = seen[cluster] = set()
        if len(hashes) < limit:
            hashes.add(hash(record_path))


def _same_schema(metadata: dict[str, Any], current: str) -> bool:
    try:
        return compiled_schema.normalized(metadata["avro.schema"]) == current
    except (KeyError, ValueError, TypeError):
        return False


def read_records(
    path: Path, on_damage: Callable[[Damage], None] | None = None
) -> Iterator[dict[str, Any]]:
    """Every readable record of a log file or folder, in order. A damaged block is left out,
    `on_damage` hears which file and block, and reading goes on after it; without `on_damage`
    the first damage raises EventLogError."""

    def damaged(damage: Damage) -> None:
        if on_damage is None:
            raise EventLogError(damage.describe())
        on_damage(damage)

    # Read into today's schema: a file of an older (or newer, compatible) release gets the
    # fields it lacks at their defaults (avro/README.md).
    reader = compiled_schema.parsed(compiled_schema.current_text())
    for file in log_files(path):
        for number, block, _ in log_blocks.blocks(file, damaged, reader):
            try:
                records = log_blocks.block_records(block)
            except Exception as exc:
                damaged(Damage(file, number, reason_of(exc)))
                continue
            yield from records


class Span(NamedTuple):
    """One logged record's Avro bytes (the schema's binary form) and what copying it needs."""

    cluster: str
    seq: int
    path: str
    ts_ms: int
    captured_ms: int
    body: bytes


_SPAN_FIELDS = ("cluster", "seq", "path", "ts_ms", "captured_ms")


def read_spans(path: Path, on_damage: Callable[[Damage], None]) -> Iterator[list[Span]]:
    """Like `read_records`, a block's records at a time, without decoding them: each record's
    bytes in the current schema with its cluster, seq, path and times. Records of the current
    schema are split off the block as they are (the splitter jumps over events written as
    sized blocks, and walks those of older files); a file of another schema version is decoded
    into the current one and encoded again."""
    text = compiled_schema.current_text()
    parsed, current = compiled_schema.parsed(text), compiled_schema.normalized(text)
    split = compiled_schema.splitter(text, _SPAN_FIELDS)
    encode = compiled_schema.sized_encoder(text)
    for file in log_files(path):
        for number, block, metadata in log_blocks.blocks(file, on_damage, parsed):
            try:
                if _same_schema(metadata, current):
                    spans = [
                        Span._make(t) for t in split(block.bytes_.getvalue(), block.num_records)
                    ]
                else:
                    spans = [
                        Span._make((*(r[f] for f in _SPAN_FIELDS), encode(r)))
                        for r in log_blocks.block_records(block)
                    ]
            except Exception as exc:
                on_damage(Damage(file, number, reason_of(exc)))
                continue
            yield spans
