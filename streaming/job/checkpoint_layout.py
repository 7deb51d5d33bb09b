"""Which layout of the alert stage's state a checkpoint holds, so a job never resumes on state
of another shape: Spark would either fail deep inside a micro-batch or, worse, start the new
layout's state empty and alert as if the cluster had just appeared.

The layout is the number of partition shards (`--shards`; 0: one group per cluster, the only
layout of the first releases). A checkpoint remembers it in `alert-stage.json`; one with progress
but no such file was written by a release before shards, so it holds the one-group layout.

By default (`--shards auto`) the job resumes a checkpoint in the layout it holds and gives a new
one partition shards, one for each core of a local master and at least two: a shard's state
moves in and out of the state store in buckets, so a micro-batch's cost follows the records it
holds, not the cluster's size, and the shards run side by side."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from zkcdc.streaming.errors import StreamingError

MARKER = "alert-stage.json"


def describe(partition_shards: int) -> str:
    if partition_shards == 0:
        return "one group per cluster (--shards 0)"
    return f"{partition_shards} partition shards (--shards {partition_shards})"


def recorded_layout(checkpoint: Path) -> int | None:
    """The checkpoint's layout, or None for a checkpoint that has none yet."""
    marker = checkpoint / MARKER
    try:
        return int(json.loads(marker.read_text())["shards"])
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StreamingError(f"checkpoint {checkpoint}: unreadable {MARKER}: {e}") from e
    # Offsets without a marker: written by a release before shards.
    return 0 if (checkpoint / "alerts" / "offsets").is_dir() else None


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
        (checkpoint / MARKER).write_text(json.dumps({"shards": partition_shards}) + "\n")
        return
    if recorded != partition_shards:
        raise StreamingError(
            f"checkpoint {checkpoint} holds the alert stage's state as {describe(recorded)}, "
            f"not {describe(partition_shards)}: resume it with --shards {recorded}, or start "
            "afresh without losing an alert: a new --checkpoint reading the changes topic "
            "from --starting-offsets earliest (while it still holds capture's snapshot), or "
            "`zkcdc replay` of the event log into a new changes topic"
        )
