"""The legacy `/consumers` tree written by pre-2.0 clients (the seed documents' formats):

- `/consumers/G/ids/C` (ephemeral): `{"version":1,"subscription":{"T":threads},"pattern":"static",
  "timestamp":"..."}`
- `/consumers/G/owners/T/P` (ephemeral): the owning thread, `consumerIdString-threadIndex`
- `/consumers/G/offsets/T/P`: the committed offset as a bare decimal long
"""

from __future__ import annotations

from dataclasses import dataclass

from zkcdc.capture.decoders.json_data import (
    LONG_MAX,
    LONG_MIN,
    Unparseable,
    decimal,
    in_range,
    integer,
    json_object,
    previous,
)
from zkcdc.capture.records import ClusterEvent
from zkcdc.ground.change_types import EventType


@dataclass(frozen=True)
class Registration:
    subscription: dict[str, int]
    pattern: str | None


def parse_registration(data: bytes | None) -> Registration:
    obj = json_object(data)
    integer(obj, "version", 1)
    subscription = obj.get("subscription")
    if not isinstance(subscription, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in subscription.values()
    ):
        raise Unparseable("field 'subscription' is not an object of topic -> thread count")
    for threads in subscription.values():
        in_range(threads, "thread count")
    pattern = obj.get("pattern")
    return Registration(dict(subscription), pattern if isinstance(pattern, str) else None)


def decode_registration(
    group: str, consumer_id: str, before: bytes | None, after: bytes | None
) -> list[ClusterEvent]:
    if after is None:
        if before is None:
            return []
        old = previous(parse_registration, before)
        return [
            ClusterEvent(
                type=EventType.CONSUMER_DEREGISTERED,
                group=group,
                consumer_id=consumer_id,
                subscription=old.subscription if old else None,
                pattern=old.pattern if old else None,
            )
        ]
    new = parse_registration(after)
    if new == previous(parse_registration, before):
        return []
    return [
        ClusterEvent(
            type=EventType.CONSUMER_REGISTERED,
            group=group,
            consumer_id=consumer_id,
            subscription=new.subscription,
            pattern=new.pattern,
        )
    ]


def text(data: bytes | None) -> str:
    if data is None:
        raise Unparseable("no data")
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise Unparseable(f"not UTF-8 at byte {exc.start}") from exc


def owner(data: bytes | None) -> str:
    value = text(data)
    if not value:
        raise Unparseable("empty owner")
    return value


def decode_owner(
    group: str, topic: str, partition: int, before: bytes | None, after: bytes | None
) -> list[ClusterEvent]:
    new = owner(after) if after is not None else None
    old = previous(owner, before)
    if new == old:
        return []
    return [
        ClusterEvent(
            type=EventType.PARTITION_OWNER_CHANGED,
            group=group,
            topic=topic,
            partition=partition,
            owner_before=old,
            owner_after=new,
        )
    ]


def offset(data: bytes | None) -> int:
    return decimal(text(data), "offset", LONG_MIN, LONG_MAX)


def decode_offset(
    group: str, topic: str, partition: int, before: bytes | None, after: bytes | None
) -> list[ClusterEvent]:
    if after is None:
        return []
    new = offset(after)
    old = previous(offset, before)
    if new == old:
        return []
    return [
        ClusterEvent(
            type=EventType.OFFSET_COMMITTED,
            group=group,
            topic=topic,
            partition=partition,
            offset_before=old,
            offset_after=new,
        )
    ]
