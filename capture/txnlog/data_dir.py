"""A ZooKeeper data dir's files: its snapshots, and its transaction logs read in zxid order as
far as they are written, following appends, preallocated padding, an entry still being written,
roll-over to a new `log.<zxid>` file and old files purged meanwhile.

Only file reads happen here; what the bytes mean is `txnlog` and `zk_snapshot`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zkcdc.capture.txnlog.snapshot import Snapshot, read_snapshot_file, zxid_of
from zkcdc.capture.txnlog.transactions import (
    HEADER_SIZE,
    MAGIC,
    LogEnd,
    Txn,
    TxnLogError,
    read_entries,
)

_SMALL_READ = 64 * 1024  # following a live log: new entries are few, the rest is padding
_LARGE_READ = 8 * 1024 * 1024  # catching up


@dataclass(frozen=True)
class LogDamage:
    """A log entry that cannot be read (its checksum or framing is wrong): never given out."""

    file: Path
    reason: str

    def describe(self) -> str:
        return f"damaged ZooKeeper log {self.file}: {self.reason}"


class HistoryGap(TxnLogError):
    """The logs no longer reach back to the zxid to resume after (purged meanwhile)."""


def continues(first_zxid: int, after_zxid: int) -> bool:
    """Whether a log file starting at `first_zxid` holds the transaction after `after_zxid`:
    it starts at or before it, or it starts a later leader epoch (zxid = epoch << 32 | counter;
    a new leader's first transaction has counter 1)."""
    if first_zxid <= after_zxid + 1:
        return True
    return first_zxid & 0xFFFFFFFF == 1 and first_zxid >> 32 > after_zxid >> 32


def version_dir(data_dir: Path) -> Path:
    """`DIR/version-2` (ZooKeeper's dataDir or dataLogDir), or DIR itself if it holds the files."""
    nested = data_dir / "version-2"
    if nested.is_dir():
        return nested
    if data_dir.is_dir() and (log_files(data_dir) or snapshot_files(data_dir)):
        return data_dir
    raise TxnLogError(f"{data_dir} holds no ZooKeeper data (no version-2 folder, no log.* files)")


def _named(directory: Path, prefix: str) -> list[Path]:
    files = []
    for file in directory.glob(prefix + "*"):
        try:
            zxid_of(file)
        except TxnLogError:
            continue  # e.g. a .tmp file of ZooKeeper's
        files.append(file)
    return sorted(files, key=zxid_of)


def log_files(directory: Path) -> list[Path]:
    return _named(directory, "log.")


def snapshot_files(directory: Path) -> list[Path]:
    return _named(directory, "snapshot.")


def start_snapshot(
    directory: Path, on_problem: Callable[[str], None], oldest: bool = False
) -> Snapshot:
    """The newest readable snapshot (a live start), or with `oldest` the oldest one the logs
    still continue from (the whole retained history). A snapshot still being written, or
    damaged, is reported and passed over."""
    logs = [zxid_of(f) for f in log_files(directory)]
    candidates = snapshot_files(directory)
    if oldest:
        # Logs must continue from it: a log file starting at or before its zxid + 1.
        candidates = [
            s for s in candidates if any(continues(z, zxid_of(s)) for z in logs)
        ] or candidates
    else:
        candidates.reverse()
    for file in candidates:
        try:
            return read_snapshot_file(file)
        except TxnLogError as exc:
            on_problem(f"snapshot passed over: {exc}")
    raise TxnLogError(f"no readable snapshot.<zxid> file in {directory}")


class LogReader:
    """The transactions after `after_zxid`, in zxid order, as far as written when `poll` is
    called. A damaged entry is reported (file, offset) and the rest of its file skipped.

    An entry that fails its checksum at the written end of a live log may only have been read
    while ZooKeeper was writing it: a read racing a write can see a later page of it and not yet
    an earlier one (end byte present, zeros before it). Such an entry is read again; it is
    damage once it has failed for `settle_s`, or still fails after ZooKeeper has moved on to a
    newer file. Files that nothing writes any more (a copy) use `settle_s=0`."""

    def __init__(
        self,
        directory: Path,
        after_zxid: int,
        on_damage: Callable[[LogDamage], None],
        *,
        list_every_s: float = 0.02,
        settle_s: float = 1.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.last_zxid = after_zxid
        self._on_damage = on_damage
        self._list_every_s = list_every_s
        self._now = now
        self._listed_at = -1e18
        self._file: Path | None = None
        self._fd: int | None = None
        self._pos = HEADER_SIZE
        self._broken = False
        self._chunk = _SMALL_READ
        self._settle_s = settle_s
        self._suspect: tuple[int, float, str] | None = None  # (offset, since, reason)
        covering = [f for f in log_files(directory) if zxid_of(f) <= after_zxid + 1]
        if covering:
            self._open(covering[-1])
        else:
            self._open_next(force=True)  # the first file, if it continues: else a gap

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self, limit: int = 20_000) -> list[Txn]:
        out: list[Txn] = []
        checked_newer = False
        while len(out) < limit:
            if self._fd is None:
                if not self._open_next(force=True):
                    break
                continue
            txns, end = self._read() if not self._broken else ([], None)
            for txn in txns:
                if txn.zxid > self.last_zxid:
                    out.append(txn)
                    self.last_zxid = txn.zxid
            if txns:
                continue
            if checked_newer:
                # ZooKeeper rolls to a new file only after flushing this one, and this read
                # came after the new file was seen: this one is complete.
                if end is not None and not end.complete:
                    suspect = self._suspect
                    reason = (
                        suspect[2]
                        if suspect is not None and suspect[0] == end.offset
                        else f"torn entry at {end.offset}"
                    )
                    self._on_damage(LogDamage(self._file or self.directory, reason))
                self.close()
                checked_newer = False
                continue
            if self._newer() is None:
                break  # the end of what is written so far
            checked_newer = True  # read this file once more before moving on
        return out

    # -- files --------------------------------------------------------------------------
    def _newer(self, force: bool = False) -> Path | None:
        now = self._now()
        if not force and now - self._listed_at < self._list_every_s:
            return None
        self._listed_at = now
        current = zxid_of(self._file) if self._file is not None else -1
        later = [f for f in log_files(self.directory) if zxid_of(f) > current]
        return later[0] if later else None

    def _open_next(self, force: bool) -> bool:
        nxt = self._newer(force)
        if nxt is None:
            return False
        if self._file is None and not continues(zxid_of(nxt), self.last_zxid):
            raise HistoryGap(
                f"the logs in {self.directory} start at zxid {zxid_of(nxt):#x}, "
                f"after {self.last_zxid + 1:#x}: transactions in between were purged"
            )
        return self._open(nxt)

    def _open(self, file: Path) -> bool:
        try:
            fd = os.open(file, os.O_RDONLY)
        except FileNotFoundError:
            return False  # purged between listing and opening: the next listing moves on
        header = os.pread(fd, HEADER_SIZE, 0)
        if len(header) < HEADER_SIZE:
            os.close(fd)  # just created: its header is not written yet
            return False
        self._file, self._fd, self._pos, self._broken = file, fd, HEADER_SIZE, False
        self._chunk, self._suspect = _SMALL_READ, None
        if header[:4] != MAGIC:
            self._broken = True
            self._on_damage(LogDamage(file, f"not a ZooKeeper transaction log ({header[:4]!r})"))
        return True

    def _read(self) -> tuple[list[Txn], LogEnd | None]:
        assert self._fd is not None
        while True:
            size = self._chunk
            data = os.pread(self._fd, size, self._pos)
            txns: list[Txn] = []
            end: LogEnd | None = None
            try:
                for item in read_entries(data, 0, base=self._pos):
                    if isinstance(item, LogEnd):
                        end = item
                    else:
                        txns.append(item)
            except TxnLogError as exc:
                if self._settling(exc):
                    self._pos, self._chunk = exc.offset, _SMALL_READ
                    return txns, LogEnd(exc.offset, complete=False)
                self._on_damage(LogDamage(self._file or self.directory, str(exc)))
                self._broken = True
                return txns, None
            assert end is not None
            self._suspect = None
            cut_by_us = end.cut
            self._pos = end.offset
            if cut_by_us and not txns:
                self._chunk = min(size * 2, 1 << 30)  # one entry larger than the read
                continue
            # Larger reads only while catching up (the read ended inside the entries); at the
            # written end the rest is preallocated zeros, not worth copying on every poll.
            self._chunk = _LARGE_READ if cut_by_us else _SMALL_READ
            return txns, end

    def _settling(self, exc: TxnLogError) -> bool:
        """Whether a failing entry may still be one being written: read it again later."""
        now = self._now()
        if self._suspect is None or self._suspect[0] != exc.offset:
            self._suspect = (exc.offset, now, str(exc))
        return now - self._suspect[1] < self._settle_s


def read_history(
    directory: Path, after_zxid: int, on_damage: Callable[[LogDamage], None]
) -> Iterator[Txn]:
    """Every logged transaction after `after_zxid` (a copy of a data dir: nothing is written)."""
    reader = LogReader(directory, after_zxid, on_damage, list_every_s=0.0, settle_s=0.0)
    try:
        while batch := reader.poll():
            yield from batch
    finally:
        reader.close()


def newest_zxid(directory: Path) -> int:
    """The newest zxid the data dir holds: its newest snapshot's, or the last transaction of
    its newest log (0 for an empty dir). Only the newest log file is read."""
    newest = max((zxid_of(f) for f in snapshot_files(directory)), default=0)
    logs = log_files(directory)
    if logs:
        first = zxid_of(logs[-1])
        try:
            for txn in read_history(directory, first - 1, lambda damage: None):
                newest = max(newest, txn.zxid)
        except TxnLogError:  # a gap or a damaged start: what the names say is all it knows
            newest = max(newest, first - 1)
    return newest
