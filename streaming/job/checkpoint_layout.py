"""Which layout of the alert stage's state a checkpoint holds, so a job never resumes on state
of another shape: Spark would either fail deep inside a micro-batch or, worse, start the new
layout's state empty and alert as if the cluster had just appeared.

The layout is the number of partition shards (`--shards`; 0: one group per cluster, the only
layout of the first releases). A checkpoint remembers it in `alert-stage.json`; one with progress
but no such file was written by a release before shards, so it holds the one-group layout.

By default (`--shards auto`) the job resumes a checkpoint in the layout it holds and gives a new
one partition shards, one for each core of a local master and at least two: a shard's state
moves in and out of the state store in buckets, so a micro-batch's cost follows the records it
holds, not the cluster's size, and the shards run side by side.

The marker also names how a shard's partitions are put in buckets (`BucketLayout`) and how many
buckets each map has: a new checkpoint's in runs of a topic's partitions, in `NEW_BUCKETS.count`
buckets; one of an earlier release's as it was written (no layout named: by each partition's
hash; no count: `EARLIER_BUCKET_COUNT`)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.bucketed_map import (
    EARLIER_BUCKET_COUNT,
    NEW_BUCKETS,
    BucketLayout,
    Buckets,
)
from zkcdc.streaming.job.checkpoint_files import last_planned
from zkcdc.streaming.job.saved_state import AFRESH

MARKER = "alert-stage.json"


def describe(partition_shards: int) -> str:
    if partition_shards == 0:
        return "one group per cluster (--shards 0)"
    return f"{partition_shards} partition shards (--shards {partition_shards})"


def _marker(checkpoint: Path) -> dict[str, Any] | None:
    try:
        marker = json.loads((checkpoint / MARKER).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StreamingError(f"checkpoint {checkpoint}: unreadable {MARKER} ({e}); {AFRESH}") from e
    if not isinstance(marker, dict):
        raise StreamingError(
            f"checkpoint {checkpoint}: unreadable {MARKER} (not an object); {AFRESH}"
        )
    return marker


def recorded_layout(checkpoint: Path) -> int | None:
    """The checkpoint's layout, or None for a checkpoint that has none yet."""
    marker = _marker(checkpoint)
    if marker is not None:
        try:
            return int(marker["shards"])
        except (KeyError, ValueError, TypeError) as e:
            raise StreamingError(
                f"checkpoint {checkpoint}: unreadable {MARKER} ({e!r}); {AFRESH}"
            ) from e
    # Offsets without a marker: written by a release before shards.
    return 0 if (checkpoint / "alerts" / "offsets").is_dir() else None


def recorded_buckets(checkpoint: Path) -> Buckets:
    """How the checkpoint's shards keep their partitions in buckets: as its marker says, or
    for one written before the marker said (or before the marker) by each partition's hash;
    as many buckets as it names, or as many as every release before the count was named."""
    marker = _marker(checkpoint) or {}
    named = marker.get("buckets", BucketLayout.KEY_HASH.value)
    try:
        layout = BucketLayout(named)
    except ValueError as e:
        known = ", ".join(layout.value for layout in BucketLayout)
        raise StreamingError(
            f"checkpoint {checkpoint}: {MARKER} names buckets {named!r}, which this release "
            f"does not know ({known}): resume it with the later release that wrote it, or {AFRESH}"
        ) from e
    count = marker.get("bucket_count", EARLIER_BUCKET_COUNT)
    if type(count) is not int or count < 1:
        raise StreamingError(
            f"checkpoint {checkpoint}: {MARKER} names bucket_count {count!r}, not a number of "
            f"buckets: resume it with the release that wrote it, or {AFRESH}"
        )
    return Buckets(layout, count)


def auto_shards(master: str) -> int:
    """The layout `--shards auto` gives a new checkpoint on `master`."""
    local = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master.strip())
    if local is not None:
        cores = local.group(1)
        return max(2, (os.cpu_count() or 2) if cores == "*" else int(cores))
    return 2  # a cluster's cores are not known before its session: the measured layout


def settle_layout(checkpoint: Path, partition_shards: int | None, master: str) -> int:
    """The layout the job runs: the one asked for (refused if the checkpoint holds another),
    or with None (`auto`) the checkpoint's own, or for a new checkpoint `auto_shards`."""
    if partition_shards is None:
        recorded = recorded_layout(checkpoint)
        partition_shards = auto_shards(master) if recorded is None else recorded
    check_layout(checkpoint, partition_shards)
    return partition_shards


def check_layout(checkpoint: Path, partition_shards: int) -> None:
    """Refuses, in one line saying what to do, a checkpoint of another layout; gives a new one
    this layout."""
    recorded = recorded_layout(checkpoint)
    if recorded is None:
        checkpoint.mkdir(parents=True, exist_ok=True)
        marker = {
            "shards": partition_shards,
            "buckets": NEW_BUCKETS.layout.value,
            "bucket_count": NEW_BUCKETS.count,
        }
        (checkpoint / MARKER).write_text(json.dumps(marker) + "\n")
        return
    planned = planned_partitions(checkpoint)
    if planned is not None and planned != max(1, recorded):
        said = f"{MARKER} says" if (checkpoint / MARKER).is_file() else f"no {MARKER}: so"
        raise StreamingError(
            f"checkpoint {checkpoint} cannot be resumed: {said} {describe(recorded)}, but its "
            f"query was planned with {planned} state partitions, another layout's: resume it "
            f"with the {MARKER} it was written with, or {AFRESH}"
        )
    if recorded != partition_shards:
        raise StreamingError(
            f"checkpoint {checkpoint} holds the alert stage's state as {describe(recorded)}, "
            f"not {describe(partition_shards)}: resume it with --shards {recorded}, or {AFRESH}"
        )


def planned_partitions(checkpoint: Path) -> int | None:
    """How many state partitions the checkpoint's query was planned with (Spark keeps its
    first run's in every micro-batch's offsets entry): a layout's shards, 1 for one group.
    None before its first micro-batch, or where the entry cannot say (checkpoint_files.py
    names a damaged one)."""
    lines = last_planned(checkpoint / "alerts")
    try:
        return int(json.loads(lines[1])["conf"]["spark.sql.shuffle.partitions"])
    except (ValueError, IndexError, KeyError, TypeError):
        return None
