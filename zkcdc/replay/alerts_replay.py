"""`zkcdc replay PATH --alerts-out FILE`: the same Spark alert job as live, over a log as
bounded input (available-now), alerts as JSON lines, and with `--state-out` the final state.
Its layout, unless asked for, follows the log's size (`readable_log`).

Spark's Avro reader fails a whole file on a damaged block, so the log is checked block by block
first (`scan_blocks`); a damaged file is replaced, in a scratch copy, by its valid records, and the damage is
reported (file and block)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro

from zkcdc.capture.delivery.event_log import Damage, log_files, read_records, scan_blocks
from zkcdc.capture.encoding.avro_codec import load_schema
from zkcdc.streaming.job.alert_runner import AlertJobOptions, run
from zkcdc.streaming.job.change_source import LogInput
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.sinks.alert_sinks import SinkOptions


def readable_copy(log: Path, damaged: list[Damage], scratch: Path) -> Path:
    """A copy of the log in which each damaged file holds only its valid records."""
    bad = {d.file for d in damaged}
    schema = load_schema()
    scratch.mkdir(parents=True, exist_ok=True)
    for file in log_files(log):
        target = scratch / file.name
        if file not in bad:
            shutil.copyfile(file, target)
            continue
        valid = list(read_records(file, lambda damage: None))
        if valid:
            with target.open("wb") as out:
                fastavro.writer(out, schema, valid, codec="deflate")
    return scratch


# A cluster whose records name up to this many znodes (~100,000 partitions: a partition
# has its folder and its state) is replayed in one group: at that size benchmark B4 measured
# one group twice as fast as two shards, and its state, a single value, small enough.
ONE_GROUP_ZNODES = 250_000


@dataclass(frozen=True)
class ReadableLog:
    path: Path  # a folder Spark can read with the log's valid records
    damaged: list[Damage]
    layout: int | None  # the layout a replay runs when none is asked for (None: auto)


def readable_log(log: Path, work: Path, on_damage: Callable[[Damage], None]) -> ReadableLog:
    """The log itself, or for a single file or a damaged log a copy in `work` of its valid
    records; the damage found; and the layout its size calls for.

    A replay has no latency to keep, only throughput: one group per cluster unless a cluster
    is too large for its state to be one value (then the sharded layout of `--shards auto`)."""
    scan = scan_blocks(log, count_paths=ONE_GROUP_ZNODES + 1)
    for damage in scan.damaged:
        on_damage(damage)
    clean = log.is_dir() and not scan.damaged
    path = log if clean else readable_copy(log, scan.damaged, work / "log")
    small = scan.paths is not None and all(n <= ONE_GROUP_ZNODES for n in scan.paths.values())
    return ReadableLog(path, scan.damaged, 0 if small else None)


def replay_alerts(
    log: Path,
    alerts_out: Path,
    state_out: Path | None = None,
    rules: RuleSettings | None = None,
    master: str = "local[2]",
    on_damage: Callable[[Damage], None] = lambda d: None,
    partition_shards: int | None = None,
) -> list[Damage]:
    """Runs the alert rules over the log; returns the damage found (the valid part was used).
    `partition_shards` None: the layout the log's size calls for (`readable_log`)."""
    work = Path(tempfile.mkdtemp(prefix="zkcdc-replay-"))
    try:
        source = readable_log(log, work, on_damage)
        shards = source.layout if partition_shards is None else partition_shards
        rules_over(source.path, alerts_out, work / "checkpoint", rules, master, state_out, shards)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return source.damaged


def rules_over(
    readable: Path,
    alerts_out: Path,
    checkpoint: Path,
    rules: RuleSettings | None = None,
    master: str = "local[2]",
    state_out: Path | None = None,
    partition_shards: int | None = None,
    spark: Any = None,
) -> None:
    """The alert job over a log Spark can read (`readable_log`), its alerts into `alerts_out`.
    `spark`: a session to run it in (left running) instead of one of its own."""
    alerts_out.write_text("")  # this run's alerts only
    options = AlertJobOptions(
        source=LogInput(readable),
        sinks=SinkOptions(alerts_out=alerts_out),
        checkpoint=checkpoint,
        master=master,
        partition_shards=partition_shards,
        rules=rules or RuleSettings(),
        available_now=True,
        state_out=state_out,
    )
    run(options, threading.Event(), spark)
