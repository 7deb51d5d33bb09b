"""Change records larger than the changes topic takes.

ZooKeeper allows a znode of up to `jute.maxbuffer` (1 MiB by default, more where raised), and a
change record carries two images of it, so a record can be several MiB: over Kafka's default
limit of 1 MB a message. zkcdc creates its topic with room for them (`max.message.bytes`, the
setting `max_record_bytes`, 8 MiB) and sets its producer to match, so with ZooKeeper's default
limit every record goes to Kafka whole.

A record still over the limit (a topic created elsewhere with less room, a larger
`jute.maxbuffer`) must neither stop capture nor be left out: it goes to Kafka without its
images' bytes (their `data` null), and its header `zkcdc.omitted` says so, with each left-out
image's size and SHA-256; if even that is too large, without its events too (their count kept).
The event log always holds the record whole: `zkcdc events cat` shows the full bytes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

OMITTED_HEADER = "zkcdc.omitted"
DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024
# What a message needs besides its value: key, headers, the record batch around it.
MESSAGE_OVERHEAD = 64 * 1024


def fitted(
    record: dict[str, Any], serialize: Callable[[dict[str, Any]], bytes], limit: int
) -> tuple[bytes, bytes]:
    """The record's value for Kafka within `limit` bytes (as far as leaving the images' bytes
    and then its events out can make it), and the `zkcdc.omitted` header's value."""
    omitted: dict[str, Any] = {}
    trimmed = dict(record)
    for image in ("before", "after"):
        znode = record.get(image)
        if znode is not None and znode.get("data") is not None:
            data = znode["data"]
            omitted[image] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            trimmed[image] = {**znode, "data": None}
    value = serialize(trimmed)
    if len(value) > limit and trimmed.get("events"):
        omitted["events"] = len(trimmed["events"])
        trimmed["events"] = []
        value = serialize(trimmed)
    omitted["reason"] = (
        f"the record is over the {limit} bytes the topic takes; the event log has it"
    )
    return value, json.dumps(omitted, sort_keys=True).encode()
