"""`/brokers/ids/N`: broker registrations, versions 1-5 (ephemeral; czxid is the broker epoch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zkcdc.capture.decoders.json_data import Unparseable, integer, json_object
from zkcdc.capture.records import ClusterEvent, Znode
from zkcdc.ground.change_types import EventType


@dataclass(frozen=True)
class Registration:
    host: str | None
    port: int | None
    endpoints: tuple[str, ...]
    rack: str | None


def parse(data: bytes | None) -> Registration:
    obj = json_object(data)
    version = integer(obj, "version")
    if not 1 <= version <= 5:
        raise Unparseable(f"broker registration version {version} is not known")
    endpoints = obj.get("endpoints", [])  # v2+
    if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
        raise Unparseable("field 'endpoints' is not a list of strings")
    host = obj.get("host")  # v4+ write null/-1 when there is no PLAINTEXT listener
    rack = obj.get("rack")  # v3+
    return Registration(
        host=host if isinstance(host, str) else None,
        port=_optional_int(obj, "port"),
        endpoints=tuple(endpoints),
        rack=rack if isinstance(rack, str) else None,
    )


def _optional_int(obj: dict[str, Any], key: str) -> int | None:
    return integer(obj, key) if obj.get(key) is not None else None


def decode(broker_id: int, before: Znode | None, after: Znode | None) -> list[ClusterEvent]:
    if after is None:
        if before is None:
            return []
        return [_event(EventType.BROKER_DEREGISTERED, broker_id, before, None)]
    if after.data is None and (before is None or before.czxid != after.czxid):
        # Kafka registers in one multi: create the znode empty (its czxid is the broker epoch),
        # then set its data. Only the transaction log shows the empty step: nothing yet.
        return (
            []
            if before is None
            else [_event(EventType.BROKER_DEREGISTERED, broker_id, before, None)]
        )
    registration = parse(after.data)
    if before is None or (before.data is None and before.czxid == after.czxid):
        return [_event(EventType.BROKER_REGISTERED, broker_id, after, registration)]
    if before.czxid != after.czxid:
        # Deleted and created again between two reads: a restart with a new broker epoch.
        return [
            _event(EventType.BROKER_DEREGISTERED, broker_id, before, None),
            _event(EventType.BROKER_REGISTERED, broker_id, after, registration),
        ]
    return [_event(EventType.BROKER_UPDATED, broker_id, after, registration)]


def _event(kind: EventType, broker_id: int, znode: Znode, reg: Registration | None) -> ClusterEvent:
    return ClusterEvent(
        type=kind,
        broker_id=broker_id,
        broker_epoch=znode.czxid,
        host=reg.host if reg else None,
        port=reg.port if reg else None,
        endpoints=reg.endpoints if reg else None,
        rack=reg.rack if reg else None,
    )
