"""A job started on a new checkpoint far behind its topic's end takes that backlog whole before
its query starts, and its shards begin from what it gives them.

Through the sharded layout a backlog costs three to four times the single engine's Python
work, since every record reaches every shard (BENCHMARKS.md, B9: a job started against
1,000,000 partitions raised its first alert after minutes). So, where a new checkpoint's query
would start `TAKE_AT` records or more behind:
1. the backlog's end is fixed: the topic's last stable offsets, written to `taken.json` with
   nothing else yet;
2. one batch query reads the backlog and runs each cluster's records, in seq order as the
   job's step takes them, through the single engine in one Python task, cuts it into the
   layout's shards (streaming/rules/engine_split.py) and writes their MapState entries
   (shard_stage.stored_entries), beside the alerts (each with its place), the dead letters, the
   placing figures and, with a state topic, the upserts: `rows/` (Parquet), then `taken.json`
   says so;
3. the driver hands those rows to the sinks once (a sink ledger of the folder's own);
4. the query starts at the backlog's end, its shards given their entries as Spark's initial
   state for as long as it has committed no micro-batch.

A kill at any step: the next start finds what the steps before it wrote and goes on from
there (a step cut short is done again; the rows' delivery resumes as a micro-batch's does).
Taken this way, the alerts and the state are the ones the shards would have made, record for
record (the split's proof)."""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zkcdc.ground import logs
from zkcdc.ground.child_processes import ends_with_parent
from zkcdc.ground.gc_pause import gc_paused
from zkcdc.ground.private_files import atomic_write
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_job import dead_letter_rows, drain_ordered
from zkcdc.streaming.job.bucketed_map import Buckets
from zkcdc.streaming.job.change_source import RECORD_COLUMNS, KafkaInput, changes_with_dead_letters
from zkcdc.streaming.job.checkpoint_files import entries
from zkcdc.streaming.job.python_worker import ready_for_next_tasks
from zkcdc.streaming.job.shard_stage import placed_rows, slot_of, stored_entries
from zkcdc.streaming.rules import engine_record
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_split import split
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.seq_order import SeqOrder

log = logs.get("zkcdc.stream")

# A new checkpoint's query this many records or more behind takes its backlog whole: a
# default micro-batch's bound (catch_up.CATCH_UP_RECORDS). Below it, the shards' own
# micro-batches are about as quick.
TAKE_AT = 100_000
FOLDER = "initial-state"
VERSION = 1

# The batch query's rows: what a micro-batch's stateful step gives (kind alert, state, dead,
# order; shard_stage.SHARDED_OUTPUT_SCHEMA), or a shard's MapState entry (kind entry: its
# shard, the entry's kind and number, its bytes).
ROWS_SCHEMA = (
    "kind string, key string, json string, status string, at_ms long, place string, "
    "cluster string, shard int, entry int, n int, blob binary"
)
_DELIVERED = ("kind", "key", "json", "status", "at_ms", "place")


class InitialStateError(StreamingError):
    """The folder of a taken backlog cannot be read: the job says how to start afresh."""


@dataclass(frozen=True)
class TakenBacklog:
    """A backlog taken whole: where the query starts, and the rows the take made."""

    folder: Path
    topic: str
    ends: dict[int, int]  # source partition -> the offset the query starts at
    shards: int

    @property
    def rows(self) -> Path:
        return self.folder / "rows"

    def starting_offsets(self) -> str:
        return json.dumps({self.topic: {str(p): o for p, o in sorted(self.ends.items())}})


def folder_of(checkpoint: Path) -> Path:
    return checkpoint / FOLDER


def taken(checkpoint: Path, topic: str, shards: int) -> TakenBacklog | None:
    """The backlog this checkpoint took, once its rows are all written (None: never, or cut
    short before the end, which the next take does again)."""
    marker = folder_of(checkpoint) / "taken.json"
    try:
        data = json.loads(marker.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InitialStateError(f"{marker} cannot be read: {exc}") from exc
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise InitialStateError(f"{marker} is not version {VERSION} of a taken backlog")
    if not data.get("rows_written"):
        return None
    if data.get("topic") != topic or data.get("shards") != shards:
        raise InitialStateError(
            f"{marker} was taken from topic {data.get('topic')} for {data.get('shards')} "
            f"shards, not {topic} for {shards}"
        )
    ends = {int(p): int(o) for p, o in data["ends"].items()}
    return TakenBacklog(folder_of(checkpoint), topic, ends, shards)


def worth_taking(checkpoint: Path, behind: int | None, take_at: int) -> bool:
    """Whether a start should take its backlog whole: its query has planned nothing yet (a
    new checkpoint), and it starts `take_at` records or more behind (0: never)."""
    if not take_at or behind is None or behind < take_at:
        return False
    return not entries(checkpoint / "alerts" / "offsets")


def take(
    spark: Any,
    source: KafkaInput,
    checkpoint: Path,
    settings: RuleSettings,
    partitions: int,
    shards: int,
    buckets: Buckets,
    with_state: bool,
) -> TakenBacklog:
    """Steps 1 and 2: the backlog's end fixed, then read and taken whole into rows."""
    folder = folder_of(checkpoint)
    shutil.rmtree(folder, ignore_errors=True)  # a take cut short: done again from the start
    folder.mkdir(parents=True)
    marks = source.kafka.watermarks(source.topic, 30.0)
    backlog = TakenBacklog(folder, source.topic, {p: high for p, (_, high) in marks.items()},
                           shards)  # fmt: skip
    _mark(backlog, rows_written=False)
    read = replace(source, ending_offsets=backlog.starting_offsets(), max_records_per_batch=None)
    records = changes_with_dead_letters(spark, read).select(*RECORD_COLUMNS)
    # One task reads the backlog as it takes it: the single engine takes each cluster's
    # records in one Python task anyway, and a shuffle of them to it cost more than the read
    # (B9, 1,000,000 partitions); meanwhile the records are placed in seq order as they come.
    taker = take_whole(settings, partitions, shards, buckets, with_state)
    rows = records.coalesce(1).mapInArrow(taker, ROWS_SCHEMA)
    rows.write.mode("overwrite").parquet(str(backlog.rows))
    _mark(backlog, rows_written=True)
    return backlog


def _mark(backlog: TakenBacklog, rows_written: bool) -> None:
    atomic_write(
        backlog.folder / "taken.json",
        json.dumps({"version": VERSION, "topic": backlog.topic, "shards": backlog.shards,
                    "ends": {str(p): o for p, o in backlog.ends.items()},
                    "rows_written": rows_written}),
    )  # fmt: skip


def take_whole(
    settings: RuleSettings, partitions: int, shards: int, buckets: Buckets, with_state: bool
) -> Any:
    """The function for `mapInArrow` over the whole backlog in one task: each cluster's
    records placed in seq order as they are read, then through the single engine, its alerts
    and state as rows, its shards as their entries; the dead letters passed on."""
    schemas = engine_record.versions()  # read on the driver: a worker may not see avro/

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        ready_for_next_tasks()
        engine_record.use(schemas)
        with gc_paused():
            orders: dict[str, SeqOrder] = {}
            letters: dict[str, list[Any]] = {"path": [], "events": []}
            for batch in batches:
                _place(batch.to_pydict(), orders, letters, partitions)
            if letters["path"]:
                yield from _arrow_batches(_padded(dead_letter_rows(iter([letters]))))
            for cluster, order in orders.items():
                rows = _taken_rows(cluster, order, settings, shards, buckets, with_state)
                yield from _arrow_batches(rows)

    return run


def _place(
    columns: dict[str, list[Any]],
    orders: dict[str, SeqOrder],
    letters: dict[str, list[Any]],
    partitions: int,
) -> None:
    """A batch of the backlog's rows (RECORD_COLUMNS) into its clusters' orders, as the job's
    step adds a micro-batch's (alert_job.add_rows); a dead letter (cluster null) aside."""
    for cluster, seq, partition, op, path, ts, events in zip(
        *(columns[c] for c in RECORD_COLUMNS), strict=True
    ):
        if cluster is None:
            letters["path"].append(path)
            letters["events"].append(events)
            continue
        order = orders.get(cluster)
        if order is None:
            order = orders[cluster] = SeqOrder(partitions)
        order.add(seq, partition, (ts, op, path or "", events or "[]"), -1)


def _taken_rows(
    cluster: str,
    order: SeqOrder,
    settings: RuleSettings,
    shards: int,
    buckets: Buckets,
    with_state: bool,
) -> dict[str, list[Any]]:
    """A cluster's placed backlog through the single engine: its rows (ROWS_SCHEMA)."""
    engine = AlertEngine(cluster, settings)
    placed = drain_ordered(engine, order)
    report = order.take_report()  # the take's own: the shards start with none to say
    # The single engine's upserts (below) are the shards' too: they start with none to give
    # (and the split does not sort a million entities among them).
    changed, engine.changed = engine.changed, set()
    with EntriesOnTwoCores(engine, order, shards, buckets) as entries:
        engine.changed = changed
        states = engine.take_state() if with_state else engine.forget_changes()
        out = _padded(placed_rows(cluster, placed, states, report))
        got = entries.result()
    count = len(got)
    for column in _DELIVERED:
        out[column] += ["entry"] * count if column == "kind" else [None] * count
    out["cluster"] += [cluster] * count
    for i, column in enumerate(("shard", "entry", "n", "blob")):
        out[column] += [row[i] for row in got]
    return out


# ROWS_SCHEMA's columns as Arrow types, and the most rows a batch of them holds.
_ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "binary": "binary"}
_ROWS_A_BATCH = 100_000


def rows_schema() -> Any:
    """ROWS_SCHEMA as Arrow's schema."""
    import pyarrow as pa

    columns = (column.split() for column in ROWS_SCHEMA.split(", "))
    return pa.schema([(name, getattr(pa, _ARROW_TYPES[kind])()) for name, kind in columns])


def _arrow_batches(rows: dict[str, list[Any]]) -> Iterator[Any]:
    import pyarrow as pa

    yield from pa.Table.from_pydict(rows, schema=rows_schema()).to_batches(_ROWS_A_BATCH)


class EntriesOnTwoCores:
    """The shards' MapState entries (shard_stage.stored_entries) of a single engine cut into
    them (engine_split.split), on two cores: a forked copy of this process cuts and writes the
    partition shards while this one cuts the cluster shard, goes on with the upserts and the
    alerts' rows, and writes the cluster shard's entries in `result`, which then waits for the
    copy's. At 1,000,000 partitions each side is ~8 s of Python, and the read is done, so the
    other core is free. The engine is cut when this is made, and must then hold no changes to
    hand on (the shards start with none); it is left as it was. Where there is no fork, every
    shard is cut when this is made and written in `result`. Used as a context manager, a take
    that fails before `result` ends the copy; the copy ends with its process too."""

    def __init__(self, engine: AlertEngine, order: SeqOrder, shards: int, buckets: Buckets) -> None:
        self._shards, self._buckets = shards, buckets
        self._child: tuple[int, int] | None = None  # (pid, the read end of its pipe)
        if not hasattr(os, "fork"):
            self._own = split(engine, order, shards)
            return
        read, write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the copy: the partition shards cut, their entries down the pipe, gone
            code = 1
            try:
                ends_with_parent(parent)
                os.close(read)
                with os.fdopen(write, "wb") as pipe:
                    pieces = split(engine, order, shards, range(1, shards + 1))
                    marshal.dump(self._written(pieces, 1), pipe)
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self._child = (pid, read)
        try:
            self._own = split(engine, order, shards, range(1))
        except BaseException:
            self.abandon()
            raise

    def _written(
        self, pieces: list[tuple[AlertEngine, SeqOrder]], first: int
    ) -> list[tuple[int, int, int, bytes]]:
        return [(shard, entry, n, blob) for shard, piece in enumerate(pieces, first)
                for entry, n, blob in stored_entries(*piece, self._shards,
                                                     self._buckets)]  # fmt: skip

    def __enter__(self) -> EntriesOnTwoCores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abandon()

    def abandon(self) -> None:
        """Ends the copy if `result` has not taken its entries (the take failed in between):
        otherwise it would wait for a reader forever, its pipe full."""
        if self._child is None:
            return
        pid, read = self._child
        self._child = None
        os.close(read)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    def result(self) -> list[tuple[int, int, int, bytes]]:
        own = self._written(self._own, 0)
        if self._child is None:
            return own
        pid, read = self._child
        self._child = None
        with os.fdopen(read, "rb") as pipe:
            try:
                theirs: list[tuple[int, int, int, bytes]] = marshal.load(pipe)
            except (EOFError, ValueError, TypeError) as exc:
                theirs = []
                failure: Exception | None = exc
            else:
                failure = None
        _, status = os.waitpid(pid, 0)
        if failure is not None or os.waitstatus_to_exitcode(status) != 0:
            raise InitialStateError(
                f"the forked writer of the shards' entries failed (exit "
                f"{os.waitstatus_to_exitcode(status)}): {failure}"
            )
        return own + theirs


def _padded(rows: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Rows of the delivered columns (a place null where none is given), with the entry
    columns null."""
    count = len(rows["kind"])
    out = {column: list(rows.get(column, [None] * count)) for column in _DELIVERED}
    for column in ("cluster", "shard", "entry", "n", "blob"):
        out[column] = [None] * count
    return out


def delivered_rows(backlog: TakenBacklog) -> list[tuple[Any, ...]]:
    """Step 3's rows, as a sharded micro-batch's are (kind, key, json, status, at_ms, place),
    in place order. Read here, not through Spark: with a state topic a large cluster's are a
    row a partition, and Spark's rows cost seconds a million where Arrow's columns do not."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(backlog.rows, columns=list(_DELIVERED))
    table = table.filter(pc.not_equal(table["kind"], "entry"))
    # A micro-batch's sort (BatchDelivery) puts the rows without a place (state, dead letters,
    # placing figures) first, in their order, then the alerts by place. Arrow orders text by
    # its UTF-8 bytes, which is Python's order of code points.
    placed = pc.is_valid(table["place"])
    parts = (table.filter(pc.invert(placed)), table.filter(placed).sort_by("place"))
    return [row for part in parts
            for row in zip(*(part[c].to_pylist() for c in _DELIVERED), strict=True)]  # fmt: skip


def initial_state(spark: Any, backlog: TakenBacklog) -> Any:
    """Step 4: the shards' entries grouped as the query's stateful step groups its input
    (cluster, slot: shard_stage.routed), for `transformWithStateInPandas`."""
    from pyspark.sql import functions as F

    frame = spark.read.parquet(str(backlog.rows)).where(F.col("kind") == "entry")
    slot = slot_of(F.col("cluster"), F.col("shard"), backlog.shards)
    return frame.select("cluster", slot.alias("slot"), "entry", "n", "blob").groupBy(
        "cluster", "slot"
    )


def committed_nothing(checkpoint: Path) -> bool:
    """Whether the job's query has committed no micro-batch (its initial state still to be
    used: Spark takes it in the first)."""
    return not entries(checkpoint / "alerts" / "commits")
