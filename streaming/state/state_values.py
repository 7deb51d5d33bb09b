"""One message of the state topic, checked to be what the alert job writes (`state_records`):
a `cluster/kind/id` key and a JSON object of that kind, or a tombstone. Anything else raises
ValueError, so a reader skips and counts it instead of showing a table with a hole in it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_int(v: Any) -> bool:
    return v is None or _int(v)


def _ints(v: Any) -> bool:
    return v is None or (isinstance(v, list) and all(_int(x) for x in v))


def _strs(v: Any) -> bool:
    return v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v))


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _map(v: Any) -> bool:
    return v is None or isinstance(v, dict)


# The fields a reader relies on, per kind; a missing optional field reads as None.
FIELDS: dict[str, dict[str, Check]] = {
    "broker": {"broker_id": _int, "endpoints": _strs, "epoch": _opt_int,
               "preferred_partitions": _opt_int, "preferred_not_led": _opt_int},
    "controller": {"broker_id": _opt_int, "epoch": _opt_int, "last_broker_id": _opt_int},
    "partition": {"topic": _str, "partition": _int, "leader": _opt_int, "isr": _ints,
                  "replicas": _ints, "leader_epoch": _opt_int},
    "topic": {"topic": _str, "partitions": _opt_int, "config": _map},
    "group": {"group": _str, "members": _map, "owners": _map, "offsets": _map},
}  # fmt: skip
REQUIRED = {"broker": "broker_id", "partition": "partition", "topic": "topic", "group": "group"}


def state_key(key: bytes | None) -> tuple[str, str]:
    """(the whole key, its kind)."""
    if not key:
        raise ValueError("no key")
    text = key.decode("utf-8")  # UnicodeDecodeError is a ValueError
    parts = text.split("/")
    if len(parts) < 2 or not parts[0] or parts[1] not in FIELDS:
        raise ValueError(f"key {text[:80]!r} is no cluster/kind/id")
    return text, parts[1]


def _loads(data: bytes) -> Any:
    """orjson first: the ui takes ~100,000 state records in seconds through a broker failure
    (B8), several times faster than Python's json, which reads what orjson refuses (NaN)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def state_value(kind: str, data: bytes) -> dict[str, Any]:
    value = _loads(data)
    if not isinstance(value, dict):
        raise ValueError(f"a {type(value).__name__}, not a JSON object")
    if value.get("kind") != kind:
        raise ValueError(f"kind {str(value.get('kind'))[:40]!r} under a {kind} key")
    required = REQUIRED.get(kind)
    if required is not None and required not in value:
        raise ValueError(f"a {kind} without {required}")
    for name, check in FIELDS[kind].items():
        if not check(value.get(name)):
            raise ValueError(f"{kind} field {name} is {str(value.get(name))[:40]!r}")
    return value


def state_entry(message: Any) -> tuple[str, dict[str, Any] | None]:
    """(key, value), the value None for a tombstone; ValueError for anything else."""
    key, kind = state_key(message.key())
    data = message.value()
    return key, None if data is None else state_value(kind, data)
