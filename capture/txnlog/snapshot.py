"""ZooKeeper's snapshot files (`dataDir/version-2/snapshot.<zxid>`): the serialized data tree,
read as a pure function of the file's bytes.

A snapshot is a header (`ZKSN`, version, dbid), the sessions (id, timeout), the ACL cache, then
every znode depth-first as its path (the root is "") and its record (data, ACL id, persisted
stat), up to the path "/" that ends the tree; then the Adler-32 of everything before it and "/"
again. ZooKeeper 3.6+ append a digest (and 3.7+ the last processed zxid) behind that seal.

A snapshot is fuzzy: it is written while transactions go on, so it may already hold some that
come after the zxid in its name. Replaying the log from that zxid + 1 is still right, as long as
a transaction whose effect is already there is recognised (by zxids) and not applied twice."""

from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from zkcdc.capture.records import Znode
from zkcdc.capture.txnlog.transactions import TxnLogError

MAGIC = b"ZKSN"
_STAT = struct.Struct(">qqqqiiiqq")  # czxid mzxid ctime mtime version cversion aversion owner pzxid
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_CONTAINER = -(1 << 63)  # EphemeralType: a container's ephemeralOwner; TTL znodes: 0xFF......


@dataclass(frozen=True)
class Snapshot:
    zxid: int  # from the file's name: everything up to it is in the tree
    nodes: dict[str, Znode]  # absolute path ("/" for the root) -> znode
    sessions: dict[int, int]  # session id -> timeout (ms)


def zxid_of(file: Path) -> int:
    """The zxid in a `log.<hex>` or `snapshot.<hex>[.gz]` file name."""
    try:
        return int(file.name.split(".")[1], 16)
    except (IndexError, ValueError) as exc:
        raise TxnLogError(f"{file.name} is not named like ZooKeeper's log.<zxid>") from exc


def read_snapshot_file(file: Path) -> Snapshot:
    try:
        raw = file.read_bytes()
        if file.suffix == ".gz":
            raw = gzip.decompress(raw)
        elif file.suffix == ".snappy":
            raise TxnLogError(f"{file}: snappy-compressed snapshots are not supported")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TxnLogError(f"cannot read snapshot {file}: {exc}") from exc
    try:
        return read_snapshot(raw, zxid_of(file))
    except TxnLogError as exc:
        raise TxnLogError(f"{file}: {exc}") from exc


def read_snapshot(data: bytes, zxid: int) -> Snapshot:
    """The tree and sessions of a snapshot's (uncompressed) bytes. Raises TxnLogError when it is
    not a snapshot, is cut short (still being written) or its checksum does not match."""
    if data[:4] != MAGIC:
        raise TxnLogError(f"not a ZooKeeper snapshot (starts {data[:4]!r})")
    try:
        pos = 16  # magic, version, dbid
        (count,) = _INT.unpack_from(data, pos)
        pos += 4
        sessions = {}
        for _ in range(count):
            session, timeout = struct.unpack_from(">qi", data, pos)
            sessions[session] = timeout
            pos += 12
        pos = _skip_acl_cache(data, pos)
        nodes, pos = _read_nodes(data, pos)
        (checksum,) = _LONG.unpack_from(data, pos)
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise TxnLogError(f"snapshot cut short or malformed: {exc}") from exc
    if zlib.adler32(data[:pos]) != checksum:
        raise TxnLogError("snapshot checksum mismatch")
    return Snapshot(zxid, nodes, sessions)


def _string(data: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _INT.unpack_from(data, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > len(data):
        raise TxnLogError("a field runs past the end of the snapshot")
    return data[pos : pos + n].decode(), pos + n


def _skip_acl_cache(data: bytes, pos: int) -> int:
    (entries,) = _INT.unpack_from(data, pos)
    pos += 4
    for _ in range(entries):
        pos += 8  # the ACL's id in the cache
        (acls,) = _INT.unpack_from(data, pos)
        pos += 4
        for _ in range(max(acls, 0)):
            pos += 4  # perms
            _, pos = _string(data, pos)  # scheme
            _, pos = _string(data, pos)  # id
    return pos


def _read_nodes(data: bytes, pos: int) -> tuple[dict[str, Znode], int]:
    nodes: dict[str, Znode] = {}
    unpack_int, unpack_stat, size = _INT.unpack_from, _STAT.unpack_from, len(data)
    while True:
        (n,) = unpack_int(data, pos)
        pos += 4
        if n < 0 or pos + n > size:
            raise TxnLogError(f"bad path length {n} at offset {pos - 4}")
        path = data[pos : pos + n].decode()
        pos += n
        if path == "/":
            return nodes, pos  # the end of the tree
        (n,) = unpack_int(data, pos)
        pos += 4
        if n < 0:
            value = None
        else:
            if pos + n > size:
                raise TxnLogError(f"data of {path} runs past the end of the snapshot")
            value = data[pos : pos + n]
            pos += n
        pos += 8  # ACL id
        czxid, mzxid, ctime, mtime, version, _, _, owner, _ = unpack_stat(data, pos)
        pos += _STAT.size
        if owner < 0 and (owner == _CONTAINER or owner >> 56 == -1):
            owner = 0  # a container's or TTL znode's marker: clients see no owner
        nodes[path or "/"] = Znode(value, version, czxid, mzxid, ctime, mtime, owner)
