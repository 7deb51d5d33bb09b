"""The alert job's state between micro-batches, as data: one cluster's (or one shard's) engine
and seq order written as an Avro record (`avro/EngineState.avsc`), never as pickled objects.

A pickle names the classes and attributes of the release that wrote it, so renaming one of
them breaks every running job's resume. This record names only what the state is: partitions,
brokers, conditions, timers, windows, the records waiting for their turn. A later release reads
an older version by Avro's schema resolution (`avro/history/EngineState/`), as it reads older
change records. The rule settings are not in it: they are the job's flags, read at each start.

A blob is `MAGIC`, one byte of version, then the record's Avro binary body."""

from __future__ import annotations

import functools
import heapq
import json
from collections import Counter, deque
from typing import Any

import fastavro

from zkcdc.ground.schema_files import released_versions
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.alert_tracker import AlertTracker, _Condition
from zkcdc.streaming.rules.cluster_state import Broker, ClusterState, Entity, Group, Partition
from zkcdc.streaming.rules.engine_scope import Scope
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import OrderReport, SeqOrder

MAGIC = b"ZKES"
SCHEMA = "EngineState"


class UnreadableState(StreamingError):
    """Saved state this release cannot read (another format, a newer version, damage)."""


Versions = list[tuple[int, dict[str, Any]]]
_carried: Versions | None = None  # on a Spark worker: the versions the driver read


def versions() -> Versions:
    """Every released version of the schema, oldest first. A Spark worker may not see
    `avro/` (a cluster's executors get the code as a zip): the job reads them on the driver
    and carries them to its workers (`use`)."""
    found = _carried if _carried is not None else released_versions(SCHEMA)
    if not found:
        raise UnreadableState(f"no released version of {SCHEMA} under avro/history/")
    return found


def use(carried: Versions) -> None:
    """On a worker: the versions the driver read, in place of `avro/`."""
    global _carried
    if carried != _carried:
        _carried = carried
        for cached in (_schemas, _parsed, _bucket_schema):
            cached.cache_clear()


@functools.cache
def _schemas() -> dict[int, Any]:
    """Every released version's parsed schema, by version: the newest writes, any reads."""
    return {n: _parsed(n)[0] for n, _ in versions()}


@functools.cache
def _parsed(number: int) -> tuple[Any, dict[str, Any]]:
    """Version `number`'s schema parsed, and its named types (a bucket's items are some)."""
    named: dict[str, Any] = {}
    schema = dict(versions())[number]
    return fastavro.parse_schema(schema, named_schemas=named), named


@functools.cache
def _bucket_schema(number: int, item: str) -> Any:
    """An array of one of version `number`'s records (self-contained: the record's own fields
    are plain types)."""
    return fastavro.parse_schema(
        {"type": "array", "items": _parsed(number)[1][f"io.zkcdc.state.{item}"]}
    )


def version() -> int:
    return max(_schemas())


def is_record(blob: bytes) -> bool:
    return blob[: len(MAGIC)] == MAGIC


def encode(engine: AlertEngine, order: SeqOrder) -> bytes:
    from io import BytesIO

    out = BytesIO()
    out.write(MAGIC + bytes([version()]))
    fastavro.schemaless_writer(out, _schemas()[version()], _engine_data(engine, order))
    return out.getvalue()


def decode(blob: bytes, settings: RuleSettings) -> tuple[AlertEngine, SeqOrder]:
    """The engine and order `encode` wrote, the rules as `settings` say."""
    from io import BytesIO

    written = _version_of(blob)
    try:
        data: dict[str, Any] = fastavro.schemaless_reader(  # type: ignore[assignment]
            BytesIO(blob[len(MAGIC) + 1 :]), _schemas()[written], _schemas()[version()]
        )
    except (EOFError, ValueError, TypeError, KeyError) as exc:
        raise UnreadableState(f"the saved state is damaged: {exc}") from exc
    return _engine(data, settings), _order(data["order"])


# -- a shard's buckets (streaming/job/bucketed_map.py) -----------------------------------
def encode_partitions(bucket: dict[tuple[str, int], Partition]) -> bytes:
    return _encode_bucket("PartitionHeld", [partition_data(k, p) for k, p in bucket.items()])


def decode_partitions(blob: bytes) -> dict[tuple[str, int], Partition]:
    return dict(partition_of(x) for x in _decode_bucket("PartitionHeld", blob))


def encode_topics(bucket: dict[str, set[int]]) -> bytes:
    return _encode_bucket("TopicHeld", [{"topic": t, "partitions": sorted(ps)}
                                        for t, ps in bucket.items()])  # fmt: skip


def decode_topics(blob: bytes) -> dict[str, set[int]]:
    return {x["topic"]: set(x["partitions"]) for x in _decode_bucket("TopicHeld", blob)}


def _encode_bucket(item: str, rows: list[dict[str, Any]]) -> bytes:
    from io import BytesIO

    out = BytesIO()
    out.write(MAGIC + bytes([version()]))
    fastavro.schemaless_writer(out, _bucket_schema(version(), item), rows)
    return out.getvalue()


def _decode_bucket(item: str, blob: bytes) -> list[dict[str, Any]]:
    from io import BytesIO

    written = _version_of(blob)
    try:
        rows: list[dict[str, Any]] = fastavro.schemaless_reader(  # type: ignore[assignment]
            BytesIO(blob[len(MAGIC) + 1 :]), _bucket_schema(written, item),
            _bucket_schema(version(), item),
        )  # fmt: skip
    except (EOFError, ValueError, TypeError, KeyError) as exc:
        raise UnreadableState(f"a saved state bucket is damaged: {exc}") from exc
    return rows


def _version_of(blob: bytes) -> int:
    if not is_record(blob) or len(blob) <= len(MAGIC):
        raise UnreadableState("the saved state is not an engine state record")
    written = blob[len(MAGIC)]
    if written not in _schemas():
        raise UnreadableState(
            f"the saved state is version {written} of {SCHEMA}; this release reads up to "
            f"version {version()}"
        )
    return written


# -- to data -------------------------------------------------------------------------------
def _engine_data(engine: AlertEngine, order: SeqOrder) -> dict[str, Any]:
    scope = engine.scope
    return {
        "cluster": engine.cluster,
        "now_ms": engine.now_ms,
        "last_seq": engine.last_seq,
        "scope": None if scope is None else {"shard": scope.shard,
                                             "partition_shards": scope.partition_shards},
        "state": _state_data(engine.state),
        "conditions": [
            {"key": _key(key), "severity": c.severity, "summary": c.summary,
             "details": c.details, "since_ms": c.since_ms, "due_ms": c.due_ms,
             "firing": c.firing, "instant": c.instant}
            for key, c in engine.tracker.conditions.items()
        ],
        "due": [{"due_ms": due, "key": _key(key)} for due, key in engine.tracker._due],
        "windows": [{"key": _key(key), "times_ms": list(times)}
                    for key, times in engine.windows.items()],
        "window_expiries": [
            {"rule": rule, "due": [{"due_ms": due, "key": _key(key)} for due, key in entries]}
            for rule, entries in engine.window_expiries.items()
        ],
        "changed": [{"kind": kind, "key_json": json.dumps(key)} for kind, key in engine.changed],
        "order": _order_data(order),
    }  # fmt: skip


def partition_data(key: tuple[str, int], p: Partition) -> dict[str, Any]:
    return {"topic": key[0], "partition": key[1], "replicas": list(p.replicas),
            "adding": list(p.adding), "removing": list(p.removing), "leader": p.leader,
            "isr": list(p.isr), "leader_epoch": p.leader_epoch,
            "controller_epoch": p.controller_epoch}  # fmt: skip


def _state_data(s: ClusterState) -> dict[str, Any]:
    return {
        "partitions": [partition_data(key, p) for key, p in s.partitions.items()],
        "topics": [{"topic": t, "partitions": sorted(ps)} for t, ps in s.topics.items()],
        "topic_configs": s.topic_configs,
        "brokers": [{"broker_id": b, "alive": x.alive, "endpoints": list(x.endpoints),
                     "epoch": x.epoch} for b, x in s.brokers.items()],
        "controller": s.controller,
        "last_controller": s.last_controller,
        "controller_epoch": s.controller_epoch,
        "kraft_controller_epoch": s.kraft_controller_epoch,
        "deletions": sorted(s.deletions),
        "reassignments": [{"topic": t, "partition": p} for t, p in sorted(s.reassignments)],
        "groups": [
            {"group": name, "members": g.members,
             "owners": [{"topic": t, "partition": p, "owner": o} for (t, p), o in g.owners.items()],
             "offsets": [{"topic": t, "partition": p, "offset": o}
                         for (t, p), o in g.offsets.items()]}
            for name, g in s.groups.items()
        ],
        "preferred": [{"broker_id": b, "count": n} for b, n in s.preferred.items()],
        "not_led": [{"broker_id": b, "count": n} for b, n in s.not_led.items()],
    }  # fmt: skip


def _order_data(o: SeqOrder) -> dict[str, Any]:
    return {
        "partitions": o.partitions,
        "silent_ms": o.silent_ms,
        "pending": [{"seq": seq, "ts_ms": w[0], "op": w[1], "path": w[2], "events_json": w[3]}
                    for seq, w in o.pending.items()],
        "heads": marks(o.heads),
        "head_ts": marks(o.head_ts),
        "heard": marks(o.heard),
        "turn": o.turn,
        "newest_ts": o.newest_ts,
        "first_ts": o.first_ts,
        "passed": [{"first": a, "last": b} for a, b in o.passed],
        "report": {"gaps": o.report.gaps, "unproven": o.report.unproven,
                   "unplaced": o.report.unplaced, "duplicates": o.report.duplicates,
                   "waiting": o.report.waiting},
    }  # fmt: skip


def marks(by_partition: dict[int, int]) -> list[dict[str, int]]:
    return [{"partition": p, "value": v} for p, v in by_partition.items()]


def _key(key: tuple[str, str]) -> dict[str, str]:
    return {"rule": key[0], "entity": key[1]}


# -- from data -----------------------------------------------------------------------------
def _engine(d: dict[str, Any], settings: RuleSettings) -> AlertEngine:
    scope = d["scope"]
    engine = AlertEngine(
        d["cluster"], settings,
        scope=None if scope is None else Scope(scope["shard"], scope["partition_shards"]),
    )  # fmt: skip
    engine.now_ms, engine.last_seq = d["now_ms"], d["last_seq"]
    engine.state = _state(d["cluster"], d["state"])
    tracker = AlertTracker(d["cluster"])
    for c in d["conditions"]:
        tracker.conditions[_unkey(c["key"])] = _Condition(
            c["severity"], c["summary"], dict(c["details"]), c["since_ms"], c["due_ms"],
            c["firing"], c["instant"],
        )  # fmt: skip
    tracker._due = [(x["due_ms"], _unkey(x["key"])) for x in d["due"]]
    heapq.heapify(tracker._due)  # already a heap as written; cheap insurance for a reader
    engine.tracker = tracker
    engine.windows = {_unkey(w["key"]): deque(w["times_ms"]) for w in d["windows"]}
    engine.window_expiries = {
        e["rule"]: deque((x["due_ms"], _unkey(x["key"])) for x in e["due"])
        for e in d["window_expiries"]
    }
    engine.changed = {_entity(x["kind"], x["key_json"]) for x in d["changed"]}
    return engine


def partition_of(x: dict[str, Any]) -> tuple[tuple[str, int], Partition]:
    return (x["topic"], x["partition"]), Partition(
        tuple(x["replicas"]), tuple(x["adding"]), tuple(x["removing"]), x["leader"],
        tuple(x["isr"]), x["leader_epoch"], x["controller_epoch"],
    )  # fmt: skip


def _state(cluster: str, d: dict[str, Any]) -> ClusterState:
    s = ClusterState(cluster)
    s.partitions = dict(partition_of(x) for x in d["partitions"])
    s.topics = {x["topic"]: set(x["partitions"]) for x in d["topics"]}
    s.topic_configs = {t: dict(c) for t, c in d["topic_configs"].items()}
    s.brokers = {x["broker_id"]: Broker(x["alive"], tuple(x["endpoints"]), x["epoch"])
                 for x in d["brokers"]}  # fmt: skip
    s.controller, s.last_controller = d["controller"], d["last_controller"]
    s.controller_epoch, s.kraft_controller_epoch = (
        d["controller_epoch"],
        d["kraft_controller_epoch"],
    )
    s.deletions = set(d["deletions"])
    s.reassignments = {(x["topic"], x["partition"]) for x in d["reassignments"]}
    s.groups = {
        g["group"]: Group(
            {m: dict(t) for m, t in g["members"].items()},
            {(x["topic"], x["partition"]): x["owner"] for x in g["owners"]},
            {(x["topic"], x["partition"]): x["offset"] for x in g["offsets"]},
        )
        for g in d["groups"]
    }
    s.preferred = Counter({x["broker_id"]: x["count"] for x in d["preferred"]})
    s.not_led = Counter({x["broker_id"]: x["count"] for x in d["not_led"]})
    return s


def _order(d: dict[str, Any]) -> SeqOrder:
    order = SeqOrder(d["partitions"], d["silent_ms"])
    order.pending = {x["seq"]: (x["ts_ms"], x["op"], x["path"], x["events_json"])
                     for x in d["pending"]}  # fmt: skip
    order.heads = {x["partition"]: x["value"] for x in d["heads"]}
    order.head_ts = {x["partition"]: x["value"] for x in d["head_ts"]}
    order.heard = {x["partition"]: x["value"] for x in d["heard"]}
    order.turn, order.newest_ts, order.first_ts = d["turn"], d["newest_ts"], d["first_ts"]
    order.passed = [(x["first"], x["last"]) for x in d["passed"]]
    order.report = OrderReport(**d["report"])
    return order


def _unkey(x: dict[str, str]) -> tuple[str, str]:
    return x["rule"], x["entity"]


def _entity(kind: str, key_json: str) -> Entity:
    key = json.loads(key_json)
    return kind, tuple(key) if isinstance(key, list) else key
