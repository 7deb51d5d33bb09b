"""What the alert job keeps of a cluster (or of one shard of it) in Spark's state store between
micro-batches, and how a checkpoint of an earlier release is read.

Today's form is data: the engine state record (streaming/rules/engine_record.py,
avro/EngineState.avsc), and a shard's buckets of partitions and topics as arrays of that
schema's records. Releases before it kept pickled Python objects; such a value is read once,
brought to today's attributes, and written as a record from the micro-batch on. A value that is
neither is refused with `UnreadableState`, whose message says how to start afresh."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from typing import Any

from zkcdc.streaming.rules import engine_record
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.cluster_state import Partition
from zkcdc.streaming.rules.engine_record import UnreadableState
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import SeqOrder

AFRESH = (
    "start afresh without losing an alert: a new --checkpoint reading the changes topic from "
    "--starting-offsets earliest (while it still holds capture's snapshot; a consumer then sees "
    "some alerts twice, under the same alert_id, none lost), or `zkcdc replay` of the event log "
    "into a new changes topic"
)


def engine_blob(engine: AlertEngine, order: SeqOrder) -> bytes:
    return engine_record.encode(engine, order)


def read_engine(
    blob: bytes, settings: RuleSettings, partitions: int
) -> tuple[AlertEngine, SeqOrder]:
    """The engine and order a checkpoint keeps, today's form or an earlier release's; the rules
    as `settings` say, the order waiting for `partitions` source partitions at least."""
    with _said_how_to_start_afresh():
        if engine_record.is_record(blob):
            engine, order = engine_record.decode(blob, settings)
        else:
            engine, order = _from_pickle(blob, settings)
    order.partitions = max(order.partitions, partitions)
    return engine, order


def read_partitions(blob: bytes) -> dict[tuple[str, int], Partition]:
    with _said_how_to_start_afresh():
        if engine_record.is_record(blob):
            return engine_record.decode_partitions(blob)
        return dict(_unpickled(blob))


def read_topics(blob: bytes) -> dict[str, set[int]]:
    with _said_how_to_start_afresh():
        if engine_record.is_record(blob):
            return engine_record.decode_topics(blob)
        return dict(_unpickled(blob))


@contextlib.contextmanager
def _said_how_to_start_afresh() -> Iterator[None]:
    """A value of the checkpoint that cannot be read (the engine or a shard's bucket): one line
    that says so and how to go on."""
    try:
        yield
    except UnreadableState as exc:
        raise UnreadableState(f"cannot read the job's saved state ({exc}); {AFRESH}") from exc


def restored_order(stored: Any, partitions: int) -> SeqOrder:
    """An earlier release's order: a SeqOrder, or (before it) its waiting records alone, by seq.
    A job resumes such a checkpoint and loses none of them."""
    if isinstance(stored, SeqOrder):
        stored.partitions = max(stored.partitions, partitions)
        return stored
    order = SeqOrder(partitions)
    for seq, waiting in dict(stored).items():
        order.add(int(seq), 0, waiting, -1)
    order.heads.clear()  # its partitions are not known: they prove nothing
    order.take_report()
    return order


def _from_pickle(blob: bytes, settings: RuleSettings) -> tuple[AlertEngine, SeqOrder]:
    """A checkpoint of a release before the state record: its pickled (engine, order), with the
    attributes later releases added (a shard's scope, a KRaft controller's epoch) filled in,
    then through the record, so the engine is made the way today's makes it."""
    engine, stored = _unpickled(blob)
    engine.__dict__.setdefault("scope", None)
    engine.state.__dict__.setdefault("kraft_controller_epoch", None)
    order = restored_order(stored, 1)
    return engine_record.decode(engine_record.encode(engine, order), settings)


def _unpickled(blob: bytes) -> Any:
    try:
        return pickle.loads(blob)  # the job's own checkpoint, of an earlier release
    except Exception as exc:  # any damage: the message says what to do
        raise UnreadableState(
            f"neither an engine state record nor an earlier release's: {exc}"
        ) from exc
