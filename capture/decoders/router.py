"""Which decoder reads which znode: a change of any path -> its typed events.

Known Kafka paths without a meaning of their own (parents, sequence counters, notification
queues the controller drains) give no events; paths outside Kafka's model give `UNKNOWN_ZNODE`.
Bytes a decoder cannot read give `UNPARSEABLE`: the daemon never dies on data."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

from zkcdc.capture import failpoints
from zkcdc.capture.decoders import (
    admin,
    brokers,
    config,
    consumers,
    controller,
    kraft,
    notifications,
    partition_state,
    topics,
)
from zkcdc.capture.decoders.json_data import Unparseable, decimal
from zkcdc.capture.records import ClusterEvent, Znode
from zkcdc.ground.change_types import EventType

Decoder = Callable[[re.Match[str], Znode | None, Znode | None], list[ClusterEvent]]


def _data(znode: Znode | None) -> bytes | None:
    # A znode that exists with no data is read as empty bytes: it is there, just blank.
    if znode is None:
        return None
    return znode.data if znode.data is not None else b""


def _entity(match: re.Match[str]) -> dict[str, object]:
    """The entity fields a path names, so even an UNPARSEABLE event says what it is about."""
    fields: dict[str, object] = {}
    groups = match.groupdict()
    for key in ("topic", "group"):
        if groups.get(key) is not None:
            fields[key] = groups[key]
    for group, name in (("partition", "partition"), ("broker", "broker_id")):
        if groups.get(group) is not None:
            # A number no record can carry is left out: the path still says which.
            with contextlib.suppress(Unparseable):
                fields[name] = decimal(groups[group], group)
    return fields


def _int(match: re.Match[str], group: str) -> int:
    """A number from the path: ZooKeeper lets anyone name a znode `.../partitions/99999999999`."""
    return decimal(match[group], group)


_ROUTES: list[tuple[str, Decoder | None]] = [
    (
        r"/brokers/topics/(?P<topic>[^/]+)/partitions/(?P<partition>[0-9]+)/state",
        lambda m, b, a: partition_state.decode(
            m["topic"], _int(m, "partition"), _data(b), _data(a)
        ),
    ),
    (
        r"/brokers/topics/(?P<topic>[^/]+)",
        lambda m, b, a: topics.decode(m["topic"], _data(b), _data(a)),
    ),
    (r"/brokers/ids/(?P<broker>[0-9]+)", lambda m, b, a: brokers.decode(_int(m, "broker"), b, a)),
    (r"/controller", lambda m, b, a: controller.decode_controller(_data(b), _data(a))),
    (r"/controller_epoch", lambda m, b, a: controller.decode_epoch(_data(b), _data(a))),
    (
        r"/admin/reassign_partitions",
        lambda m, b, a: admin.decode_reassignment(_data(b), _data(a)),
    ),
    (
        r"/admin/preferred_replica_election",
        lambda m, b, a: admin.decode_preferred_election(_data(b), _data(a)),
    ),
    (
        r"/admin/delete_topics/(?P<topic>[^/]+)",
        lambda m, b, a: admin.decode_topic_deletion(m["topic"], b is not None, a is not None),
    ),
    (r"/config/changes(/.*)?", None),
    (
        r"/config/(?P<type>topics|brokers|users|clients|ips)/(?P<name>.+)",
        lambda m, b, a: config.decode(m["type"], m["name"], _data(b), _data(a)),
    ),
    (
        r"/consumers/(?P<group>[^/]+)/ids/(?P<consumer>[^/]+)",
        lambda m, b, a: consumers.decode_registration(
            m["group"], m["consumer"], _data(b), _data(a)
        ),
    ),
    (
        r"/consumers/(?P<group>[^/]+)/owners/(?P<topic>[^/]+)/(?P<partition>[0-9]+)",
        lambda m, b, a: consumers.decode_owner(
            m["group"], m["topic"], _int(m, "partition"), _data(b), _data(a)
        ),
    ),
    (
        r"/consumers/(?P<group>[^/]+)/offsets/(?P<topic>[^/]+)/(?P<partition>[0-9]+)",
        lambda m, b, a: consumers.decode_offset(
            m["group"], m["topic"], _int(m, "partition"), _data(b), _data(a)
        ),
    ),
    (
        r"/isr_change_notification/[^/]+",
        lambda m, b, a: notifications.decode_isr_change(_data(b), _data(a)),
    ),
    (
        r"/log_dir_event_notification/[^/]+",
        lambda m, b, a: notifications.decode_log_dir_event(_data(b), _data(a)),
    ),
    (
        r"/kraft/brokers/(?P<broker>[0-9]+)",
        lambda m, b, a: kraft.decode_broker(_int(m, "broker"), _data(b), _data(a)),
    ),
    (
        r"/kraft/features/(?P<name>[^/]+)",
        lambda m, b, a: kraft.decode_feature(m["name"], _data(b), _data(a)),
    ),
    (r"/kraft/quorum", lambda m, b, a: kraft.decode_quorum(_data(b), _data(a))),
    (r"/kraft/migration", lambda m, b, a: kraft.decode_migration(_data(b), _data(a))),
    (r"/migration", lambda m, b, a: kraft.decode_zk_migration(_data(b), _data(a))),
    # Known, and nothing to say on their own.
    (
        r"/|/brokers|/brokers/ids|/brokers/topics|/brokers/seqid"
        r"|/brokers/topics/[^/]+/partitions(/\d+)?"
        r"|/admin|/admin/delete_topics|/config|/config/(topics|brokers|users|clients|ips)"
        r"|/consumers(/[^/]+(/(ids|owners|offsets)(/[^/]+)?)?)?"
        r"|/isr_change_notification|/log_dir_event_notification"
        r"|/cluster|/cluster/id|/feature|/latest_producer_id_block"
        r"|/kraft|/kraft/brokers|/kraft/features|/kraft/controllers(/\d+)?"
        r"|/kafka-acl(-changes|-extended|-extended-changes)?(/.*)?|/delegation_token(/.*)?",
        None,
    ),
]
_COMPILED = [(re.compile(pattern), decoder) for pattern, decoder in _ROUTES]


def unparseable(reason: str, match: re.Match[str] | None = None) -> ClusterEvent:
    entity = _entity(match) if match is not None else {}
    return ClusterEvent(type=EventType.UNPARSEABLE, reason=reason, **entity)  # type: ignore[arg-type]


def decode(path: str, before: Znode | None, after: Znode | None) -> list[ClusterEvent]:
    for pattern, decoder in _COMPILED:
        match = pattern.fullmatch(path)
        if match is None:
            continue
        if decoder is None:
            return []
        try:
            failpoints.hit("decoder")
            return decoder(match, before, after)
        except Unparseable as exc:
            return [unparseable(str(exc), match)]
        except Exception as exc:
            # Anyone can write /consumers: whatever the bytes make a decoder do, the daemon goes
            # on and the record says why its events are missing.
            return [unparseable(f"{type(exc).__name__}: {exc}"[:500], match)]
    return [ClusterEvent(type=EventType.UNKNOWN_ZNODE)]
