"""`/brokers/topics/T/partitions/P/state` (v1): leader, ISR and epochs as the controller wrote them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from zkcdc.capture.decoders.json_data import Unparseable, integer, integers, json_object, previous
from zkcdc.capture.records import ClusterEvent
from zkcdc.ground.change_types import EventType


@dataclass(frozen=True)
class PartitionState:
    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    controller_epoch: int
    # KRaft's eligible leader replicas (KIP-966), in the states a KRaft capture renders.
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@functools.lru_cache(maxsize=4096)
def parse(data: bytes | None) -> PartitionState:
    """Cached: a change's `after` is the next change's `before`, parsed once for both."""
    obj = json_object(data)
    version = integer(obj, "version", 1)
    if version != 1:
        raise Unparseable(f"partition state version {version} is not known")
    return PartitionState(
        leader=integer(obj, "leader"),
        isr=integers(obj, "isr"),
        leader_epoch=integer(obj, "leader_epoch"),
        controller_epoch=integer(obj, "controller_epoch"),
        elr=integers(obj, "eligible_leader_replicas")
        if "eligible_leader_replicas" in obj
        else None,
        last_known_elr=integers(obj, "last_known_elr") if "last_known_elr" in obj else None,
    )


def decode(
    topic: str, partition: int, before: bytes | None, after: bytes | None
) -> list[ClusterEvent]:
    """Events of one change of a state znode; `before`/`after` are None where there is no znode."""
    if after is None:
        return []  # the state goes with its topic: TOPIC_DELETED says it
    new = parse(after)
    old = previous(parse, before)
    if old is None:
        events = [
            ClusterEvent(
                type=EventType.PARTITION_STATE_CREATED,
                topic=topic,
                partition=partition,
                leader=new.leader,
                isr=new.isr,
                leader_epoch=new.leader_epoch,
                controller_epoch=new.controller_epoch,
            )
        ]
    else:
        events = _diff(topic, partition, old, new)
    if new.leader == -1 and (old is None or old.leader != -1):
        events.append(
            ClusterEvent(
                type=EventType.PARTITION_OFFLINE,
                topic=topic,
                partition=partition,
                leader=-1,
                leader_before=None if old is None else old.leader,
                isr=new.isr,
                leader_epoch=new.leader_epoch,
                controller_epoch=new.controller_epoch,
            )
        )
    return events


def _diff(
    topic: str, partition: int, old: PartitionState, new: PartitionState
) -> list[ClusterEvent]:
    def event(kind: EventType, **fields: Any) -> ClusterEvent:
        return ClusterEvent(
            type=kind,
            topic=topic,
            partition=partition,
            isr_before=old.isr,
            isr_after=new.isr,
            controller_epoch=new.controller_epoch,
            **fields,
        )

    events = []
    epochs = {"leader_epoch_before": old.leader_epoch, "leader_epoch_after": new.leader_epoch}
    if new.leader != old.leader:
        # Clean: the new leader was in sync (or there is none); -1 -> a broker outside the ISR is unclean.
        clean = new.leader == -1 or new.leader in old.isr
        events.append(
            event(
                EventType.LEADER_CHANGED,
                leader_before=old.leader,
                leader_after=new.leader,
                clean=clean,
                **epochs,
            )
        )
    elif new.leader_epoch != old.leader_epoch:
        events.append(event(EventType.LEADER_EPOCH_BUMPED, leader=new.leader, **epochs))
    removed = tuple(b for b in old.isr if b not in new.isr)
    added = tuple(b for b in new.isr if b not in old.isr)
    if removed:
        events.append(event(EventType.ISR_SHRUNK, leader=new.leader, removed=removed))
    if added:
        events.append(event(EventType.ISR_EXPANDED, leader=new.leader, added=added))
    if (new.elr, new.last_known_elr) != (old.elr, old.last_known_elr):
        events.append(event(EventType.ELR_CHANGED, leader=new.leader, elr_before=old.elr,
                            elr_after=new.elr, last_known_elr=new.last_known_elr))  # fmt: skip
    if not events and new.controller_epoch != old.controller_epoch:
        # Nothing else moved, yet the state now names another controller's epoch: said, so
        # the state kept from events equals the znode, and an older epoch is checked.
        events.append(event(EventType.PARTITION_STATE_REWRITTEN, leader=new.leader,
                            epoch_before=old.controller_epoch))  # fmt: skip
    return events
