"""Change records from a copy of `__cluster_metadata-0` (`--from-metadata-log`): the whole
history the copy still holds, for forensics after an incident.

It starts at offset 0 when the segments still reach back there, otherwise at the oldest
snapshot the segments continue from (READ records), and gives every record after it. A copy
has no quorum to ask: what its tail holds is given as it is, committed or not (a copy of a
broker's log, taken after the incident settled, holds only what was committed but its last
few records). Where Kafka's clock moved on by `heartbeat_ms` without a change (the controller's
NoOp records show it), a heartbeat at that time keeps the alert rules' timers going."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.kraft_tracker import KraftTracker
from zkcdc.capture.kraft.log_follower import MetadataLogFollower
from zkcdc.capture.kraft.metadata_dir import (
    file_entries,
    load_image,
    segment_files,
    snapshot_files,
)
from zkcdc.capture.kraft.metadata_image import MetadataImage
from zkcdc.capture.kraft.metadata_records import (
    ControlRecord,
    Entry,
    MetadataRecord,
    Undecodable,
    entries,
)
from zkcdc.capture.kraft.record_batches import Batch, BatchDamage
from zkcdc.capture.kraft.source import cluster_id_of
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.tracker import TrackerState


class MetadataLogError(CaptureError):
    """Not a metadata log copy: no segments, no snapshots."""


def metadata_history(
    directory: Path,
    cluster: str | None,
    on_damage: Callable[[str], None],
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    heartbeat_ms: int = 1_000,
) -> Iterator[ChangeRecord]:
    segments, snapshots = segment_files(directory), snapshot_files(directory)
    if not segments and not snapshots:
        raise MetadataLogError(f"no metadata log segments or snapshots in {directory}")
    name = cluster or cluster_id_of(directory)
    tracker = KraftTracker(TrackerState(cluster=name), now_ms)
    first = segments[0][0] if segments else None
    start = 0
    if first is None or first > 0:
        continuing = [s for s in snapshots if first is None or s.end_offset >= first]
        if not continuing:
            raise MetadataLogError(
                f"the segments in {directory} start at offset {first} and no snapshot reaches it"
            )
        snapshot = continuing[0]
        loaded = load_image(directory, upto=snapshot.end_offset)
        start = snapshot.end_offset
        records = tracker.load(loaded.image, start - 1, _snapshot_time(snapshot.path))
        yield from records
    else:
        tracker.image = MetadataImage()

    def damaged(damage: BatchDamage) -> None:
        on_damage(f"metadata log damaged: {damage}")

    follower = MetadataLogFollower(directory, start, damaged)
    last_ms: int | None = None
    try:
        while reads := follower.poll():
            for _segment, batch in reads:
                for entry in _entries_of(batch, on_damage):
                    changed = tracker.apply(entry)
                    if changed:
                        last_ms = entry.timestamp_ms
                        yield from changed
                    elif last_ms is not None and entry.timestamp_ms - last_ms >= heartbeat_ms:
                        last_ms = entry.timestamp_ms
                        yield tracker.heartbeat(entry.timestamp_ms)
    finally:
        follower.close()


def _entries_of(batch: Batch, on_damage: Callable[[str], None]) -> Iterator[Entry]:
    for entry in entries(batch):
        if isinstance(entry, Undecodable):
            on_damage(f"metadata record at offset {entry.offset} undecodable: {entry.problem}")
        yield entry


def _snapshot_time(path: Path) -> int:
    """The snapshot's own time: the header's last contained log timestamp."""
    for entry in file_entries(path, lambda d: None):
        if isinstance(entry, ControlRecord) and entry.name == "SnapshotHeaderRecord":
            return int(entry.fields["LastContainedLogTimestamp"])
        if isinstance(entry, MetadataRecord):
            break
    return 0
