"""Change records as the alert engine gets them (the contract's field names), made by hand."""

from __future__ import annotations

from typing import Any

from zkcdc.ground.change_types import EventType


class Feed:
    """Builds records with a running seq; `at(ts)` sets the event time of the next ones."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.seq = 0
        self.alerts: list[Any] = []

    def send(self, ts: int, path: str, *events: dict[str, Any], op: str = "UPDATE") -> list[Any]:
        self.seq += 1
        record = {"seq": self.seq, "ts_ms": ts, "op": op, "path": path, "events": list(events)}
        out = self.engine.process(record)
        self.alerts += out
        return out

    def heartbeat(self, ts: int) -> list[Any]:
        return self.send(ts, "", op="HEARTBEAT")

    def firing(self) -> set[tuple[str, str]]:
        return {(a.rule, a.entity) for a in self.alerts if a.status == "FIRING"}

    def resolved(self) -> set[tuple[str, str]]:
        return {(a.rule, a.entity) for a in self.alerts if a.status == "RESOLVED"}


def ev(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def topic(name: str, assignment: dict[int, list[int]]) -> dict[str, Any]:
    return ev(
        EventType.TOPIC_CREATED, topic=name, assignment={str(p): r for p, r in assignment.items()}
    )


def state(
    name: str, p: int, leader: int, isr: list[int], epoch: int = 0, ce: int = 1
) -> dict[str, Any]:
    return ev(EventType.PARTITION_STATE_CREATED, topic=name, partition=p, leader=leader, isr=isr,
              leader_epoch=epoch, controller_epoch=ce)  # fmt: skip


def broker(b: int, up: bool = True) -> dict[str, Any]:
    return ev(EventType.BROKER_REGISTERED if up else EventType.BROKER_DEREGISTERED, broker_id=b)


def three_brokers(engine: Any, t0: int) -> Feed:
    """Three brokers, topic t with partitions 0 and 1 (replicas [1,2,3] and [2,3,1]), a
    controller at epoch 1: all from a snapshot at `t0`."""
    feed = Feed(engine)
    for b in (1, 2, 3):
        feed.send(t0, f"/brokers/ids/{b}", broker(b), op="READ")
    feed.send(t0, "/controller", ev(EventType.CONTROLLER_ELECTED, broker_id=1), op="READ")
    feed.send(
        t0, "/controller_epoch", ev(EventType.CONTROLLER_EPOCH_CHANGED, epoch_after=1), op="READ"
    )
    feed.send(t0, "/brokers/topics/t", topic("t", {0: [1, 2, 3], 1: [2, 3, 1]}), op="READ")
    feed.send(t0, "/s0", state("t", 0, 1, [1, 2, 3]), op="READ")
    feed.send(t0, "/s1", state("t", 1, 2, [2, 3, 1]), op="READ")
    return feed
