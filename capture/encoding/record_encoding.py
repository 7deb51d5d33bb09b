"""Change records into Avro bytes without ever failing on what ZooKeeper held.

A record's events come from a decoder reading bytes anyone may have written (`/consumers` is
world-writable); the schema's ints and strings have limits the decoders might miss. A record
whose events do not fit keeps its raw images and stat, and says why its events are gone."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from zkcdc.capture.decoders import router
from zkcdc.capture.records import ChangeRecord

Encode = Callable[[dict[str, Any]], bytes]


def encode_records(
    encode: Encode, records: list[ChangeRecord]
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Each record's Avro dict and its bytes; one pass, the slow one only after a failure."""
    values = [r.to_avro() for r in records]
    try:
        return values, [encode(v) for v in values]
    except Exception:
        pass
    pairs = [encode_one(encode, r) for r in records]
    return [v for v, _ in pairs], [b for _, b in pairs]


def encode_one(encode: Encode, record: ChangeRecord) -> tuple[dict[str, Any], bytes]:
    value = record.to_avro()
    try:
        return value, encode(value)
    except Exception as exc:
        reason = f"its events do not fit the record: {type(exc).__name__}: {exc}"
        event = router.unparseable(reason[:500])
        value = dataclasses.replace(record, events=(event,)).to_avro()
        return value, encode(value)  # raw images and stat always fit
