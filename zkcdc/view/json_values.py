"""JSON values of the topics the ui reads, decoded with orjson first.

Through a broker failure at 200,000 partitions the state topic brings ~100,000 records in
seconds, and the ui server shares a busy machine: orjson decodes them several times faster
than Python's json. What orjson refuses and Python's json takes (NaN, Infinity, nesting past
1024) is read by the latter, so every value reads as before, but for an integer past 64 bits:
orjson gives the nearest float (the alert job writes none; Spark's longs are 64 bits)."""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(data: bytes | str) -> Any:
    """The value, or ValueError when no JSON reader takes it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
