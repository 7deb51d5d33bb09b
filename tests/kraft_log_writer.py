"""Writes what a KRaft controller writes, for tests: messages in Kafka's flexible encoding from
our layouts, metadata record frames, control records and magic-2 record batches with their
CRC32C. Independent of the reader: a field's bytes are built from the layout, not read back."""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from typing import Any

import crc32c

from zkcdc.capture.kraft.message_layouts import (
    CONTROL,
    METADATA,
    TYPE_DEFAULT,
    Field,
    MessageLayout,
    Struct,
    StructArray,
)

_FIXED = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "int64": ">q",
          "float64": ">d"}  # fmt: skip


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        if value < 0x80:
            out.append(value)
            return bytes(out)
        out.append((value & 0x7F) | 0x80)
        value >>= 7


def varint(value: int) -> bytes:
    return uvarint((value << 1) ^ (value >> 63))


def uuid_bytes(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def _scalar(kind: str, value: Any) -> bytes:
    if kind in _FIXED:
        return struct.pack(_FIXED[kind], value)
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    if kind == "uuid":
        return uuid_bytes(value)
    if kind in ("string", "bytes"):
        if value is None:
            return b"\x00"
        raw = value.encode() if kind == "string" else value
        return uvarint(len(raw) + 1) + raw
    raise ValueError(kind)


def _value(field: Field, version: int, value: Any) -> bytes:
    kind = field.kind
    if isinstance(kind, Struct):
        return encode_struct(kind.fields, version, value)
    if isinstance(kind, StructArray):
        if value is None:
            return b"\x00"
        return uvarint(len(value) + 1) + b"".join(
            encode_struct(kind.fields, version, v) for v in value
        )
    if kind.startswith("[]"):
        if value is None:
            return b"\x00"
        return uvarint(len(value) + 1) + b"".join(_scalar(kind[2:], v) for v in value)
    return _scalar(kind, value)


def encode_struct(fields: Sequence[Field], version: int, values: dict[str, Any]) -> bytes:
    out = bytearray()
    tagged: list[tuple[int, bytes]] = []
    for field in fields:
        if not field.present_in(version):
            continue
        value = values[field.name]
        if field.tag is not None:
            if field.default is not TYPE_DEFAULT and value == field.default:
                continue  # tagged fields at their default are not written
            if field.default is TYPE_DEFAULT and value in (0, [], None, False, ""):
                continue
            tagged.append((field.tag, _value(field, version, value)))
        else:
            out += _value(field, version, value)
    out += uvarint(len(tagged))
    for tag, data in sorted(tagged):
        out += uvarint(tag) + uvarint(len(data)) + data
    return bytes(out)


def metadata_value(api_key: int, version: int, values: dict[str, Any]) -> bytes:
    layout = METADATA[api_key]
    return (
        uvarint(1) + uvarint(api_key) + uvarint(version)
        + encode_struct(layout.fields, version, values)
    )  # fmt: skip


def control_key_value(kind: int, values: dict[str, Any]) -> tuple[bytes, bytes]:
    layout: MessageLayout = CONTROL[kind]
    return struct.pack(">hh", 0, kind), encode_struct(layout.fields, values["Version"], values)


def record_bytes(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = (
        b"\x00" + varint(ts_delta) + varint(offset_delta)
        + (varint(-1) if key is None else varint(len(key)) + key)
        + varint(len(value)) + value + varint(0)
    )  # fmt: skip
    return varint(len(body)) + body


def batch(
    base_offset: int,
    epoch: int,
    records: Sequence[tuple[bytes | None, bytes]],
    timestamp_ms: int = 1_700_000_000_000,
    control: bool = False,
) -> bytes:
    """A magic-2 batch of `(key, value)` records at consecutive offsets."""
    body = b"".join(record_bytes(i, 0, k, v) for i, (k, v) in enumerate(records))
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0x20 if control else 0,  # attributes: no compression; the control bit
            len(records) - 1,
            timestamp_ms,
            timestamp_ms,
            -1,
            -1,
            -1,
            len(records),
        )
        + body
    )
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # epoch, magic, crc, the rest
    return struct.pack(">qiibI", base_offset, length, epoch, 2, crc) + after_crc


def metadata_batch(
    base_offset: int, epoch: int, messages: Sequence[tuple[int, int, dict[str, Any]]],
    timestamp_ms: int = 1_700_000_000_000,
) -> bytes:  # fmt: skip
    """A batch of metadata records `(api_key, version, fields)`."""
    values = [(None, metadata_value(k, v, fields)) for k, v, fields in messages]
    return batch(base_offset, epoch, values, timestamp_ms)


def leader_change(base_offset: int, epoch: int, leader: int, voters: Sequence[int]) -> bytes:
    voter_list = [{"VoterId": v} for v in voters]
    key, value = control_key_value(
        2, {"Version": 0, "LeaderId": leader, "Voters": voter_list, "GrantingVoters": voter_list}
    )
    return batch(base_offset, epoch, [(key, value)], control=True)
