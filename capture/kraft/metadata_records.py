"""The records of the KRaft metadata log: a batch's records decoded into typed messages.

A metadata record's value is a frame: unsigned varints frame version (1), apiKey, version, then
the message (`message_layouts.METADATA`). A control batch's records have a key (version int16,
type int16) and a value that is the control message, its own version first. A record that
cannot be read is given as `Undecodable` with the reason: the log goes on."""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from zkcdc.capture.kraft.message_layouts import CONTROL, CONTROL_NAMES, METADATA
from zkcdc.capture.kraft.message_reader import (
    MessageError,
    Reader,
    compiled,
    read_message,
    uvarint,
)
from zkcdc.capture.kraft.record_batches import Batch


class MetadataRecord(NamedTuple):
    offset: int
    epoch: int  # the Raft epoch of the controller that wrote it
    timestamp_ms: int
    api_key: int
    version: int
    name: str
    fields: dict[str, Any]


class ControlRecord(NamedTuple):
    offset: int
    epoch: int
    timestamp_ms: int
    type: int
    name: str
    fields: dict[str, Any]


class Undecodable(NamedTuple):
    offset: int
    epoch: int
    timestamp_ms: int
    problem: str


Entry = MetadataRecord | ControlRecord | Undecodable

_new = tuple.__new__  # a NamedTuple made without its Python __new__: a call less a record


# (apiKey, version) -> (name, the compiled reader): one lookup a record, not three (B7).
_READERS: dict[tuple[int, int], tuple[str, Reader]] = {}


def decode_metadata(value: bytes) -> tuple[int, int, str, dict[str, Any]]:
    """(apiKey, version, name, fields) of one metadata record value."""
    if len(value) >= 3 and value[0] < 0x80 and value[1] < 0x80 and value[2] < 0x80:
        frame, api_key, version, p = value[0], value[1], value[2], 3  # the usual one-byte frame
    else:
        try:
            frame, p = uvarint(value, 0)
            api_key, p = uvarint(value, p)
            version, p = uvarint(value, p)
        except IndexError as exc:
            raise MessageError("record value cut short in its frame") from exc
    if frame != 1:
        raise MessageError(f"frame version {frame} (only 1 is known)")
    known = _READERS.get((api_key, version))
    if known is not None:
        name, reader = known
        try:
            fields, end = reader(value, p)
        except (IndexError, struct.error, UnicodeDecodeError) as exc:
            raise MessageError(f"{name} v{version}: {exc}") from exc
        if end != len(value):
            raise MessageError(f"{name} v{version}: {len(value) - end} byte(s) after the end")
        return api_key, version, name, fields
    layout = METADATA.get(api_key)
    if layout is None:
        raise MessageError(f"apiKey {api_key} is not a known metadata record (version {version})")
    fields = read_message(layout, version, value, p)  # checks the version, compiles its reader
    _READERS[(api_key, version)] = (layout.name, compiled(layout, version))
    return api_key, version, layout.name, fields


def decode_control(key: bytes, value: bytes) -> tuple[int, str, dict[str, Any]]:
    if len(key) < 4:
        raise MessageError("control record key shorter than 4 bytes")
    _key_version, kind = struct.unpack_from(">hh", key)
    layout = CONTROL.get(kind)
    if layout is None:
        return kind, CONTROL_NAMES.get(kind, f"control type {kind}"), {}
    if len(value) < 2:
        raise MessageError(f"{layout.name} shorter than its version")
    (version,) = struct.unpack_from(">h", value)
    return kind, layout.name, read_message(layout, version, value)


def entries(batch: Batch) -> list[Entry]:
    out: list[Entry] = []
    epoch, control = batch.epoch, batch.control
    readers = _READERS
    for offset, timestamp_ms, key, value in batch.records:
        # The usual record, inline (a call less a record, B7): a one-byte frame 1, apiKey and
        # version, of a kind read before; anything else takes decode_metadata's whole way.
        if not control and value is not None and len(value) > 3 and value[0] == 1:
            known = readers.get((value[1], value[2]))
            if known is not None:
                try:
                    fields, end = known[1](value, 3)
                except (IndexError, struct.error, UnicodeDecodeError):
                    end = -1
                if end == len(value):
                    out.append(_new(MetadataRecord, (offset, epoch, timestamp_ms, value[1],
                                                     value[2], known[0], fields)))  # fmt: skip
                    continue
        if value is None:
            out.append(Undecodable(offset, epoch, timestamp_ms, "record without a value"))
            continue
        try:
            if control:
                kind, name, fields = decode_control(key or b"", value)
                out.append(ControlRecord(offset, epoch, timestamp_ms, kind, name, fields))
            else:
                api_key, version, name, fields = decode_metadata(value)
                out.append(_new(MetadataRecord,
                                (offset, epoch, timestamp_ms, api_key, version, name, fields)))  # fmt: skip
        except MessageError as exc:
            out.append(Undecodable(offset, epoch, timestamp_ms, str(exc)))
    return out
