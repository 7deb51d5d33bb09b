"""The `/kraft` subtree a KRaft capture renders (capture/kraft/zk_tree.py): what only KRaft
has. Broker registrations with their fencing and controlled shutdown, finalized feature levels,
the controller quorum's voters and the ZooKeeper-migration state.

And `/migration`, the znode a KRaft controller keeps in ZooKeeper while it migrates the
cluster (`zookeeper.metadata.migration.enable`): written when it claims ZooKeeper with no
metadata offset yet (PRE_MIGRATION), then with the offset of the migrated metadata from which
it dual-writes (MIGRATION): the phases named as the KRaft log's ZkMigrationStateRecord names
them, so a watch capture and a KRaft capture say the same."""

from __future__ import annotations

from zkcdc.capture.decoders.json_data import Unparseable, integer, integers, json_object, previous
from zkcdc.capture.records import ClusterEvent
from zkcdc.ground.change_types import EventType


def _broker(data: bytes | None) -> tuple[bool, bool, int]:
    obj = json_object(data)
    fenced, shutdown = obj.get("fenced"), obj.get("in_controlled_shutdown")
    if not isinstance(fenced, bool) or not isinstance(shutdown, bool):
        raise Unparseable("fenced and in_controlled_shutdown must be true or false")
    return fenced, shutdown, integer(obj, "broker_epoch")


def decode_broker(broker_id: int, before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    """Fencing as it changes; a registration is born fenced (its unfencing is the event)."""
    if after is None:
        return []  # unregistered: /brokers/ids/N says it
    fenced, shutdown, epoch = _broker(after)
    old = previous(_broker, before)
    was_fenced, was_shutdown = (True, False) if old is None or old[2] != epoch else old[:2]
    events = []
    if shutdown and not was_shutdown:
        events.append(EventType.BROKER_CONTROLLED_SHUTDOWN)
    if fenced and not was_fenced:
        events.append(EventType.BROKER_FENCED)
    if was_fenced and not fenced:
        events.append(EventType.BROKER_UNFENCED)
    return [ClusterEvent(type=e, broker_id=broker_id, broker_epoch=epoch) for e in events]


def _level(data: bytes | None) -> int:
    obj = json_object(b'{"level":' + (data or b"null") + b"}")
    return integer(obj, "level")


def decode_feature(name: str, before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    new = None if after is None else _level(after)
    old = previous(_level, before)
    if new == old:
        return []
    return [ClusterEvent(type=EventType.FEATURE_LEVEL_CHANGED, feature=name,
                         level_before=old, level_after=new)]  # fmt: skip


def _voters(data: bytes | None) -> tuple[int, ...]:
    return integers(json_object(data), "voters")


def decode_quorum(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    """The set of voters: leader changes are /controller's."""
    if after is None:
        return []
    new, old = _voters(after), previous(_voters, before)
    if old is not None and new == old:
        return []
    return [ClusterEvent(type=EventType.CONTROLLER_QUORUM_CHANGED, voters=new)]


def _migration(data: bytes | None) -> str:
    state = json_object(data).get("state")
    if not isinstance(state, str):
        raise Unparseable("migration state is not a string")
    return state


def decode_migration(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    new = None if after is None else _migration(after)
    old = previous(_migration, before)
    if new == old:
        return []
    return [ClusterEvent(type=EventType.MIGRATION_STATE_CHANGED, migration_state_before=old,
                         migration_state_after=new)]  # fmt: skip


def _zk_migration(data: bytes | None) -> str:
    obj = json_object(data)
    if integer(obj, "version") != 0:
        raise Unparseable(f"migration version {obj.get('version')} is not known")
    integer(obj, "kraft_controller_id")
    return "MIGRATION" if integer(obj, "kraft_metadata_offset") >= 0 else "PRE_MIGRATION"


def decode_zk_migration(before: bytes | None, after: bytes | None) -> list[ClusterEvent]:
    """`/migration` in ZooKeeper: a KRaft controller migrating the cluster."""
    new = None if after is None else _zk_migration(after)
    old = previous(_zk_migration, before)
    if new == old:
        return []
    return [ClusterEvent(type=EventType.MIGRATION_STATE_CHANGED, migration_state_before=old,
                         migration_state_after=new)]  # fmt: skip
