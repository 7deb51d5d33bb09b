"""ZooKeeper's transaction log files (`dataDir/version-2/log.<zxid>`), read as they are written:
the first piece of the transaction-log capture mode (`--source txnlog`), pure functions over bytes.

A file is a header (`ZKLG`, format version 2, a dbid) and then entries, each an Adler-32
checksum (8 bytes), the length and bytes of a jute-serialized `TxnHeader` + transaction record
(+ a `TxnDigest` since 3.6), and an end byte `B`. The rest of the file is preallocated zeros: a
zero length ends the log as far as it is written. A last entry still being written reads as
incomplete, not as damage; a checksum that does not match is damage, reported by offset and
never given out as data."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from zkcdc.capture.errors import CaptureError

MAGIC = b"ZKLG"
END_OF_ENTRY = 0x42  # 'B'
HEADER_SIZE = 16  # magic, version (int), dbid (long)

# ZooDefs.OpCode: the transaction types that can appear in a log.
CREATE, DELETE, SET_DATA, SET_ACL, CHECK, MULTI, CREATE2 = 1, 2, 5, 7, 13, 14, 15
RECONFIG, CREATE_CONTAINER, DELETE_CONTAINER, CREATE_TTL = 16, 19, 20, 21
CREATE_SESSION, CLOSE_SESSION, ERROR = -10, -11, -1
_CREATES = (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL)


class TxnLogError(CaptureError):
    """A log file that is not one, or an entry whose checksum or framing is wrong (`offset`:
    the entry's, in its file)."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


class Op(NamedTuple):
    """One change to the tree a transaction made (a multi makes several). Immutable records
    as NamedTuples: built once per transaction on the parse path, they cost a third of a
    frozen dataclass."""

    type: int
    path: str | None = None
    data: bytes | None = None
    version: int | None = None  # setData: the version it makes; check: the checked one + 1
    ephemeral: bool = False
    ttl: int | None = None
    error: int | None = None  # ErrorTxn: the sub-operation's error code
    paths: tuple[str, ...] = ()  # closeSession: the ephemeral znodes it deletes


class Txn(NamedTuple):
    session_id: int
    cxid: int
    zxid: int
    time_ms: int
    type: int
    ops: tuple[Op, ...]
    offset: int  # of the entry in its file


@dataclass(frozen=True)
class LogEnd:
    """Where reading stopped: `offset` is the next entry's, `complete` says the rest is
    preallocated zeros or the file's end (False: an entry still being written). `cut`: the
    bytes read end inside that entry, so more of them would complete it (an entry ZooKeeper is
    still writing inside its preallocated file is there in full, zeros where the write has not
    reached: reading more only copies padding)."""

    offset: int
    complete: bool
    cut: bool = False


class _Jute:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def read_int(self) -> int:
        (value,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return int(value)

    def read_long(self) -> int:
        (value,) = struct.unpack_from(">q", self.data, self.pos)
        self.pos += 8
        return int(value)

    def read_bool(self) -> bool:
        self.pos += 1
        return self.data[self.pos - 1] != 0

    def read_buffer(self) -> bytes | None:
        n = self.read_int()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise TxnLogError(f"a field of {n} bytes runs past its entry")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def read_string(self) -> str | None:
        raw = self.read_buffer()
        return None if raw is None else raw.decode()

    def skip_acls(self) -> None:
        for _ in range(max(self.read_int(), 0)):
            self.read_int()  # perms
            self.read_string()  # scheme
            self.read_string()  # id


def read_op(kind: int, jute: _Jute) -> Op:
    """The record of one transaction type (ZooKeeper's txn.jute)."""
    if kind in _CREATES:
        path, data = jute.read_string(), jute.read_buffer()
        jute.skip_acls()
        ephemeral = jute.read_bool() if kind in (CREATE, CREATE2) else False
        jute.read_int()  # parentCVersion
        ttl = jute.read_long() if kind == CREATE_TTL else None
        return Op(kind, path, data, ephemeral=ephemeral, ttl=ttl)
    if kind in (DELETE, DELETE_CONTAINER):
        return Op(kind, jute.read_string())
    if kind == SET_DATA:
        return Op(kind, jute.read_string(), jute.read_buffer(), version=jute.read_int())
    if kind == CHECK:
        return Op(kind, jute.read_string(), version=jute.read_int())
    if kind == SET_ACL:
        path = jute.read_string()
        jute.skip_acls()
        return Op(kind, path, version=jute.read_int())
    if kind == ERROR:
        return Op(kind, error=jute.read_int())
    if kind == CLOSE_SESSION:
        # 3.6+ log the session's ephemeral znodes with its close; older ones log nothing.
        if jute.pos >= len(jute.data):
            return Op(kind)
        count = jute.read_int()
        return Op(kind, paths=tuple(jute.read_string() or "" for _ in range(max(count, 0))))
    if kind == MULTI:
        raise TxnLogError("a multi inside a multi")
    return Op(kind)  # createSession, reconfig, ...: nothing of the tree's data


_HEADER = struct.Struct(">qiqqi")  # TxnHeader: clientId cxid zxid time type
_INT = struct.Struct(">i")


def _set_data(entry: bytes, pos: int) -> Op:
    """setData, most of any log: read inline, without the general reader."""
    (n,) = _INT.unpack_from(entry, pos)
    path = entry[pos + 4 : pos + 4 + n].decode()
    pos += 4 + n
    (n,) = _INT.unpack_from(entry, pos)
    if n < 0:
        data, pos = None, pos + 4
    else:
        data, pos = entry[pos + 4 : pos + 4 + n], pos + 4 + n
        if pos > len(entry):
            raise TxnLogError(f"a field of {n} bytes runs past its entry")
    (version,) = _INT.unpack_from(entry, pos)
    return Op(SET_DATA, path, data, version)


def read_txn(entry: bytes, offset: int) -> Txn:
    """An entry's bytes (header + record) as a transaction; a multi's sub-operations in order."""
    session, cxid, zxid, time_ms, kind = _HEADER.unpack_from(entry, 0)
    if kind == SET_DATA:
        return Txn(session, cxid, zxid, time_ms, kind, (_set_data(entry, 32),), offset)
    jute = _Jute(entry, 32)
    if kind == MULTI:
        ops = []
        for _ in range(max(jute.read_int(), 0)):
            sub_kind, body = jute.read_int(), jute.read_buffer() or b""
            ops.append(read_op(sub_kind, _Jute(body)))
        return Txn(session, cxid, zxid, time_ms, kind, tuple(ops), offset)
    return Txn(session, cxid, zxid, time_ms, kind, (read_op(kind, jute),), offset)


def read_entries(data: bytes, start: int = HEADER_SIZE, base: int = 0) -> Iterator[Txn | LogEnd]:
    """The transactions of a log file's bytes from `start` (an entry's offset), then a LogEnd.
    `data` may be a piece of the file that begins at file offset `base`: offsets given out
    are the file's. Raises TxnLogError at a checksum or framing that is wrong (with the offset)."""
    if base == 0 and start == HEADER_SIZE and data[:4] != MAGIC:
        raise TxnLogError(f"not a ZooKeeper transaction log (starts {data[:4]!r})")
    pos = start
    size = len(data)
    while True:
        if pos + 12 > size:
            complete = pos == size or data.count(0, pos) == size - pos
            yield LogEnd(base + pos, complete=complete, cut=not complete)
            return
        checksum, length = struct.unpack_from(">qi", data, pos)
        if length == 0 and checksum == 0:
            yield LogEnd(base + pos, complete=True)  # preallocated zeros: the log goes on here
            return
        end = pos + 12 + length
        if length < 0:
            raise TxnLogError(f"entry at {base + pos}: length {length}", base + pos)
        if end + 1 > size:
            yield LogEnd(base + pos, complete=False, cut=True)  # the data ends inside the entry
            return
        entry = data[pos + 12 : end]
        if zlib.adler32(entry) != checksum:
            if data[end] == 0:
                # The end byte is written last: this entry is still being written.
                yield LogEnd(base + pos, complete=False)
                return
            raise TxnLogError(f"entry at {base + pos}: checksum mismatch", base + pos)
        if data[end] != END_OF_ENTRY:
            raise TxnLogError(f"entry at {base + pos}: no end-of-entry byte", base + pos)
        try:
            yield read_txn(entry, base + pos)
        except (struct.error, UnicodeDecodeError, TxnLogError) as exc:
            raise TxnLogError(
                f"entry at {base + pos}: malformed record ({exc})", base + pos
            ) from exc
        pos = end + 1
