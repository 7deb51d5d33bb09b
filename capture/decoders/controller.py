"""`/controller` (v1-v2, ephemeral) and `/controller_epoch` (a bare integer)."""

from __future__ import annotations

from zkcdc.capture.decoders.json_data import Unparseable, decimal, integer, json_object, previous
from zkcdc.capture.records import ClusterEvent
from zkcdc.ground.change_types import EventType


def controller_id(data: bytes | None) -> int:
    obj = json_object(data)
    version = integer(obj, "version", 1)
    if version not in (1, 2):
        raise Unparseable(f"controller version {version} is not known")
    return integer(obj, "brokerid")


def kraft_epoch(data: bytes | None) -> int | None:
    """v2's `kraftControllerEpoch`: the controller is a KRaft one (a migration), and the
    partition states it writes carry that epoch, not `/controller_epoch`'s."""
    value = json_object(data).get("kraftControllerEpoch")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def decode_controller(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    new = controller_id(after) if after is not None else None
    old = previous(controller_id, before)
    events = []
    if old is not None and old != new:
        events.append(
            ClusterEvent(type=EventType.CONTROLLER_RESIGNED, broker_id=old, broker_id_before=old)
        )
    if new is not None and new != old:
        elected = ClusterEvent(
            type=EventType.CONTROLLER_ELECTED,
            broker_id=new,
            broker_id_before=old,
            epoch_after=kraft_epoch(after),
        )
        events.append(elected)
    return events


def epoch(data: bytes | None) -> int:
    if data is None:
        raise Unparseable("no data")
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError as exc:
        raise Unparseable(f"controller epoch is not an integer: {data[:40]!r}") from exc
    return decimal(text, "controller epoch")


def decode_epoch(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    if after is None:
        return []
    new = epoch(after)
    old = previous(epoch, before)
    if new == old:
        return []
    return [
        ClusterEvent(type=EventType.CONTROLLER_EPOCH_CHANGED, epoch_before=old, epoch_after=new)
    ]
