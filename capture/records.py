"""The change record and its parts (docs/reference/records.md) as frozen dataclasses, with their Avro form."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, TypeVar

from zkcdc.ground.change_types import EventType, Op

T = TypeVar("T")


@dataclass(frozen=True)
class Znode:
    data: bytes | None
    version: int = 0
    czxid: int = 0
    mzxid: int = 0
    ctime_ms: int = 0
    mtime_ms: int = 0
    ephemeral_owner: int = 0


@dataclass(frozen=True)
class PartitionRef:
    topic: str
    partition: int
    replicas: tuple[int, ...] | None = None


Ints = tuple[int, ...]


def _quick_init(cls: type[T]) -> type[T]:
    """Replaces a keyword-only frozen dataclass's `__init__`, which sets every field through
    `object.__setattr__` (fifty-odd calls for a ClusterEvent: the largest single cost of
    building a record under a storm; BENCHMARKS.md, "Figures behind the code"), by one that
    fills the instance's dict at once. Same checks: unknown or missing fields are a TypeError; type checkers see the original."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING)
    if any(f.default_factory is not dataclasses.MISSING for f in fields):
        raise TypeError(f"{cls.__name__}: default factories are not supported")
    names = frozenset(f.name for f in fields)
    # In field order, so the instance's dict (which to_avro copies) lists them as declared.
    defaults = {f.name: None if f.name in required else f.default for f in fields}

    def __init__(self: Any, **values: Any) -> None:
        if not values.keys() <= names or not required <= values.keys():
            unknown = sorted(values.keys() - names)
            missing = sorted(required - values.keys())
            raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing {missing}")
        attributes = self.__dict__
        attributes.update(defaults)
        attributes.update(values)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


@_quick_init
@dataclass(frozen=True, kw_only=True)
class ClusterEvent:
    """One typed fact; only the fields that apply to its `type` are set."""

    type: EventType
    topic: str | None = None
    partition: int | None = None
    broker_id: int | None = None
    group: str | None = None
    host: str | None = None
    port: int | None = None
    endpoints: tuple[str, ...] | None = None
    rack: str | None = None
    broker_epoch: int | None = None
    broker_id_before: int | None = None
    epoch_before: int | None = None
    epoch_after: int | None = None
    topic_id: str | None = None
    assignment: dict[str, Ints] | None = None
    replicas_before: Ints | None = None
    replicas_after: Ints | None = None
    adding: Ints | None = None
    removing: Ints | None = None
    leader: int | None = None
    isr: Ints | None = None
    leader_epoch: int | None = None
    controller_epoch: int | None = None
    leader_before: int | None = None
    leader_after: int | None = None
    leader_epoch_before: int | None = None
    leader_epoch_after: int | None = None
    isr_before: Ints | None = None
    isr_after: Ints | None = None
    clean: bool | None = None
    removed: Ints | None = None
    added: Ints | None = None
    partitions: tuple[PartitionRef, ...] | None = None
    topics: tuple[str, ...] | None = None
    entity_type: str | None = None
    entity_name: str | None = None
    config_before: dict[str, str] | None = None
    config_after: dict[str, str] | None = None
    changed_keys: tuple[str, ...] | None = None
    consumer_id: str | None = None
    subscription: dict[str, int] | None = None
    pattern: str | None = None
    owner_before: str | None = None
    owner_after: str | None = None
    offset_before: int | None = None
    offset_after: int | None = None
    reason: str | None = None
    elr_before: Ints | None = None
    elr_after: Ints | None = None
    last_known_elr: Ints | None = None
    feature: str | None = None
    level_before: int | None = None
    level_after: int | None = None
    voters: Ints | None = None
    migration_state_before: str | None = None
    migration_state_after: str | None = None


@dataclass(frozen=True)
class Source:
    mode: str = "watch"
    session_id: int | None = None
    snapshot: bool = False


@dataclass(frozen=True)
class ChangeRecord:
    cluster: str
    seq: int
    op: Op
    path: str
    before: Znode | None
    after: Znode | None
    zxid: int | None
    ts_ms: int
    captured_ms: int
    versions_skipped: int = 0
    source: Source = field(default_factory=Source)
    events: tuple[ClusterEvent, ...] = ()

    def to_avro(self) -> dict[str, Any]:
        """The record as the dict fastavro writes with `avro/ChangeRecord.avsc`. Written out by
        hand rather than walked generically: it runs once per record on the capture hot path."""
        return {
            "cluster": self.cluster,
            "seq": self.seq,
            "op": self.op.value,
            "path": self.path,
            "before": None if self.before is None else _znode(self.before),
            "after": None if self.after is None else _znode(self.after),
            "zxid": self.zxid,
            "ts_ms": self.ts_ms,
            "captured_ms": self.captured_ms,
            "versions_skipped": self.versions_skipped,
            "source": {
                "mode": self.source.mode,
                "session_id": self.source.session_id,
                "snapshot": self.source.snapshot,
            },
            "events": [event_fields(e) for e in self.events],
        }


def _znode(z: Znode) -> dict[str, Any]:
    return {
        "data": z.data,
        "version": z.version,
        "czxid": z.czxid,
        "mzxid": z.mzxid,
        "ctime_ms": z.ctime_ms,
        "mtime_ms": z.mtime_ms,
        "ephemeral_owner": z.ephemeral_owner,
    }


# The fields whose values are not plain scalars (the enum, tuples, dicts): only these need
# turning into Avro's forms; the other forty-odd are copied as they are.
_COMPOUND = tuple(
    f.name
    for f in dataclasses.fields(ClusterEvent)
    if f.type not in ("int | None", "str | None", "bool | None")
)


def event_fields(event: ClusterEvent) -> dict[str, Any]:
    """An event as its Avro record: every field, compound values as plain lists and dicts."""
    out = dict(event.__dict__)  # every field, set or None: a copy, not ~50 getattr calls
    for name in _COMPOUND:
        value = out[name]
        if value is not None:
            out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind is tuple or kind is list:
        return [v if type(v) is int or type(v) is str else _plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
