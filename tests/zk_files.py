"""ZooKeeper's file formats written by hand (jute, big-endian), for unit tests of the readers'
edge cases: damage, gaps, torn tails. The formats themselves are tested on real servers' files
in tests/integration/test_txnlog_files.py."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from zkcdc.capture.txnlog.transactions import CREATE, SET_DATA


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">i", len(raw)) + raw


def set_data_txn(zxid: int, path: str, data: bytes, version: int, time_ms: int = 1_000) -> bytes:
    header = struct.pack(">qiqqi", 0x55, 1, zxid, time_ms, SET_DATA)
    return header + _string(path) + struct.pack(">i", len(data)) + data + struct.pack(">i", version)


def create_txn(zxid: int, path: str, data: bytes, time_ms: int = 1_000) -> bytes:
    header = struct.pack(">qiqqi", 0x55, 1, zxid, time_ms, CREATE)
    acls = struct.pack(">i", 1) + struct.pack(">i", 31) + _string("world") + _string("anyone")
    body = _string(path) + struct.pack(">i", len(data)) + data + acls
    return header + body + struct.pack(">?i", False, 0)


def entry(txn: bytes) -> bytes:
    return struct.pack(">qi", zlib.adler32(txn), len(txn)) + txn + b"B"


def log_file(directory: Path, first_zxid: int, txns: list[bytes], padding: int = 256) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / f"log.{first_zxid:x}"
    body = b"ZKLG" + struct.pack(">iq", 2, 0) + b"".join(entry(t) for t in txns)
    file.write_bytes(body + b"\0" * padding)
    return file


def snapshot_bytes(nodes: dict[str, tuple[bytes, int, int]]) -> bytes:
    """nodes: path ("" for the root) -> (data, version, mzxid)."""
    out = b"ZKSN" + struct.pack(">iq", 2, 0) + struct.pack(">i", 0)  # no sessions
    out += struct.pack(">i", 0)  # no ACLs cached
    for path, (data, version, mzxid) in nodes.items():
        out += _string(path) + struct.pack(">i", len(data)) + data + struct.pack(">q", -1)
        out += struct.pack(">qqqqiiiqq", 1, mzxid, 0, 0, version, 0, 0, 0, 0)
    out += _string("/")
    return out + struct.pack(">q", zlib.adler32(out)) + _string("/")
