"""Change records as the rows people read in a timeline: one row per typed event of a live
change (a snapshot's READs are the state, not news), with a one-line text and the entity it
concerns, so a partition's history, the controller's timeline and an alert's causes are all
filters over the same rows."""

from __future__ import annotations

from typing import Any

# (field stem, shown as) for before/after pairs, in the order they read best.
_PAIRS = (
    ("leader", "leader"),
    ("isr", "isr"),
    ("leader_epoch", "leader epoch"),
    ("epoch", "epoch"),
    ("replicas", "replicas"),
    ("owner", "owner"),
    ("offset", "offset"),
    ("elr", "elr"),
    ("level", "level"),
    ("migration_state", "migration"),
)
_LIVE = {"CREATE", "UPDATE", "DELETE"}


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def entity_of(event: dict[str, Any]) -> str:
    """The entity as alerts name it: `topic/partition`, `broker/N`, `controller`, `group/g`."""
    kind = str(event.get("type", ""))
    if event.get("group") is not None:
        return f"group/{event['group']}"
    if event.get("topic") is not None and event.get("partition") is not None:
        return f"{event['topic']}/{event['partition']}"
    if kind.startswith("CONTROLLER"):
        return "controller"
    if event.get("broker_id") is not None:
        return f"broker/{event['broker_id']}"
    if event.get("topic") is not None:
        return f"topic/{event['topic']}"
    return ""


def describe(event: dict[str, Any]) -> str:
    """One line: the event type, its entity and what changed (before → after)."""
    parts = [str(event.get("type", "?"))]
    entity = entity_of(event)
    if entity:
        parts.append(entity)
    if entity == "controller" and event.get("broker_id") is not None:
        parts.append(f"broker {event['broker_id']}")
    for stem, name in _PAIRS:
        before, after = event.get(f"{stem}_before"), event.get(f"{stem}_after")
        if before is not None or after is not None:
            parts.append(f"{name} {_shown(before)} → {_shown(after)}")
    for plain in ("leader", "isr", "leader_epoch", "removed", "added", "reason"):
        if event.get(plain) is not None:
            parts.append(f"{plain.replace('_', ' ')} {_shown(event[plain])}")
    if event.get("broker_id_before") is not None:
        parts.append(f"was broker {event['broker_id_before']}")
    if event.get("changed_keys"):
        parts.append(f"keys {_shown(event['changed_keys'])}")
    return " ".join(parts)


def rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one change record (decoded as Avro gives it); none for READ/HEARTBEAT."""
    if record.get("op") not in _LIVE:
        return []
    out = []
    for event in record.get("events") or ():
        row: dict[str, Any] = {
            "t": record["ts_ms"],
            "seq": record["seq"],
            "cluster": record["cluster"],
            "path": record["path"],
            "op": record["op"],
            "type": event["type"],
            "entity": entity_of(event),
            "text": describe(event),
        }
        for key in ("topic", "partition", "broker_id", "group"):
            if event.get(key) is not None:
                row[key] = event[key]
        out.append(row)
    return out


def concerns(row: dict[str, Any], entity: str) -> bool:
    """Whether a row is about an alert's entity (a broker's alerts see its registrations)."""
    if row["entity"] == entity:
        return True
    if entity == "controller":
        return str(row["type"]).startswith("CONTROLLER")
    if entity.startswith("broker/"):
        return str(row.get("broker_id")) == entity[len("broker/") :]
    if entity.startswith("topic/"):
        return row.get("topic") == entity[len("topic/") :]
    return False
