"""A micro-batch's alerts and state written by Spark itself, when files are the only sinks
of a bounded run (`replay --alerts-out [--state-out]`, `stream alerts --available-now
--no-publish --alerts-out`). pyspark is imported where the batch is written, not at the
top: every `zkcdc` command loads this module.

Collecting a replay's one micro-batch into the driver's Python (hundreds of thousands of alert
rows for a storm) was slow and held every alert in the driver's heap at once (BENCHMARKS.md,
B4).
Here Spark sorts the rows (by event time, then the engine's order, as the other sinks get
them) and writes them as text files, spilling to disk as it must; the driver then copies the
alert lines onto the JSON-lines file and reads the (small) state upserts."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from zkcdc.streaming.sinks.json_lines import start_line


def write_batch(batch: Any, folder: Path) -> None:
    """The batch's rows as text under `folder`: kind=alert (the alert's JSON, in event-time
    order), kind=state and kind=dead (`{"key": ..., "json": ...}`, json absent for a state
    entry's deletion)."""
    from pyspark.sql import functions as F

    alert = F.col("kind") == "alert"
    # The engine's order: a sharded stage's place (its shards' rows come in any order), else
    # the order the single group's rows came in.
    order = F.col("place") if "place" in batch.columns else F.monotonically_increasing_id()
    lines = (
        batch.withColumn("n", order)
        .select(
            "kind",
            F.when(alert, F.col("json")).otherwise(F.to_json(F.struct("key", "json"))).alias("l"),
            F.when(alert, F.col("at_ms")).alias("at_ms"),
            "n",
        )
        # One sort serves both: the partitioned write needs rows grouped by kind, and the
        # alerts go out in event-time order (the engine's order among equal times).
        .orderBy("kind", "at_ms", "n")
        .select("kind", "l")
    )
    lines.write.partitionBy("kind").text(str(folder))


def part_files(folder: Path, kind: str) -> list[Path]:
    return sorted((folder / f"kind={kind}").glob("part-*"))


def append_alerts(folder: Path, out: Path, skip: Callable[[str], bool] | None = None) -> None:
    """Appends the batch's alert lines to `out`; with `skip`, line by line leaving out those
    it names (a re-run of a batch whose delivery a crash cut short)."""
    files = part_files(folder, "alert")
    if not files:
        return
    start_line(out)
    with out.open("ab") as target:
        for file in files:
            with file.open("rb") as source:
                if skip is None:
                    shutil.copyfileobj(source, target, 1 << 20)
                else:
                    target.writelines(line for line in source if not skip(line.decode()))


def keyed_lines(folder: Path, kind: str) -> Iterator[tuple[str, str | None]]:
    """The batch's (key, json) rows of `kind` ("state": upserts, json None = gone; "dead":
    dead letters)."""
    for file in part_files(folder, kind):
        with file.open() as lines:
            for line in lines:
                upsert = json.loads(line)
                yield upsert["key"], upsert.get("json")
