"""`/config/<type>/<name>` (topics, brokers, users, clients, ips): dynamic config overrides."""

from __future__ import annotations

from zkcdc.capture.decoders.json_data import Unparseable, decimal, json_object, previous
from zkcdc.capture.records import ClusterEvent
from zkcdc.ground.change_types import EventType


def parse(data: bytes | None) -> dict[str, str]:
    obj = json_object(data)
    config = obj.get("config")
    if not isinstance(config, dict):
        raise Unparseable("field 'config' is not an object")
    if not all(isinstance(v, str) for v in config.values()):
        raise Unparseable("field 'config' has non-string values")
    return dict(config)


def decode(
    entity_type: str, entity_name: str, before: bytes | None, after: bytes | None
) -> list[ClusterEvent]:
    new = parse(after) if after is not None else None
    old = previous(parse, before)
    if new == old:
        return []
    was, now = old or {}, new or {}
    changed = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
    if not changed and (old is None) == (new is None):
        return []
    topic = entity_name if entity_type == "topics" else None
    broker_id = _broker_id(entity_name) if entity_type == "brokers" else None
    return [
        ClusterEvent(
            type=EventType.CONFIG_CHANGED,
            topic=topic,
            broker_id=broker_id,
            entity_type=entity_type,
            entity_name=entity_name,
            config_before=old,
            config_after=new,
            changed_keys=tuple(changed),
        )
    ]


def _broker_id(entity_name: str) -> int | None:
    """A broker's own config (`<default>` is the cluster-wide one)."""
    try:
        return decimal(entity_name, "broker id")
    except Unparseable:
        return None
