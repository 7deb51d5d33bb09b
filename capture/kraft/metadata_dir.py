"""A copy of `__cluster_metadata-0` on disk: its snapshots (`<offset>-<epoch>.checkpoint`, the
state of every record below `offset`) and its segments (`<base offset>.log`), read in order
into a metadata image.

What a copy holds past the quorum's high watermark may never have been committed; `upto`
stops reading there when the caller knows it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from zkcdc.capture.kraft.metadata_image import MetadataImage, Quorum
from zkcdc.capture.kraft.metadata_records import ControlRecord, Entry, Undecodable, entries
from zkcdc.capture.kraft.record_batches import Batch, BatchDamage, batches

_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class SnapshotFile:
    end_offset: int  # the snapshot holds every record below it
    epoch: int
    path: Path


def segment_files(directory: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of each segment, oldest first (deleted ones are gone)."""
    found = []
    for path in directory.iterdir():
        m = _SEGMENT.match(path.name)
        if m:
            found.append((int(m[1]), path))
    return sorted(found)


def snapshot_files(directory: Path) -> list[SnapshotFile]:
    """Complete snapshots, oldest first (`.checkpoint.part` is one being written)."""
    found = []
    for path in directory.iterdir():
        m = _SNAPSHOT.match(path.name)
        if m:
            found.append(SnapshotFile(int(m[1]), int(m[2]), path))
    return sorted(found, key=lambda s: s.end_offset)


def file_entries(path: Path, on_damage: Callable[[BatchDamage], None]) -> Iterator[Entry]:
    """Every record of one file, damaged batches reported and skipped."""
    for read in batches(path.read_bytes()):
        if isinstance(read, BatchDamage):
            on_damage(read)
            continue
        yield from entries(read)


def batches_from(
    directory: Path, start_offset: int, on_damage: Callable[[BatchDamage], None]
) -> Iterator[Batch]:
    """The segments' whole batches that hold an offset at or after `start_offset`."""
    segments = segment_files(directory)
    for i, (_base, path) in enumerate(segments):
        following = segments[i + 1][0] if i + 1 < len(segments) else None
        if following is not None and following <= start_offset:
            continue  # all of it is before the start
        for read in batches(path.read_bytes()):
            if isinstance(read, BatchDamage):
                on_damage(read)
            elif read.last_offset >= start_offset:
                yield read


@dataclass
class LoadedImage:
    image: MetadataImage
    next_offset: int  # the offset after the last record applied
    damage: list[BatchDamage]
    undecodable: list[Undecodable]


def load_image(directory: Path, upto: int | None = None) -> LoadedImage:
    """The image as of the newest snapshot, then every record of the segments after it
    (below `upto` when given)."""
    image = MetadataImage()
    damage: list[BatchDamage] = []
    undecodable: list[Undecodable] = []
    start = 0
    usable = [s for s in snapshot_files(directory) if upto is None or s.end_offset <= upto]
    if usable:
        snapshot = usable[-1]
        for entry in file_entries(snapshot.path, damage.append):
            _apply(image, entry, undecodable)
        start = snapshot.end_offset
        # Snapshots hold no leader changes: the quorum's own file knows the leader of an epoch.
        image.quorum = quorum_state(directory, snapshot.epoch)
    next_offset = start
    for batch in batches_from(directory, start, damage.append):
        for entry in entries(batch):
            if entry.offset < next_offset or (upto is not None and entry.offset >= upto):
                continue
            _apply(image, entry, undecodable)
            next_offset = entry.offset + 1
    return LoadedImage(image, next_offset, damage, undecodable)


def quorum_state(directory: Path, epoch: int) -> Quorum:
    """The leader of `epoch` from the `quorum-state` file, if that is the epoch it records."""
    try:
        saved = json.loads((directory / "quorum-state").read_text())
        leader, saved_epoch = int(saved["leaderId"]), int(saved["leaderEpoch"])
        voters = tuple(sorted(int(v["voterId"]) for v in saved.get("currentVoters") or []))
    except (OSError, ValueError, KeyError, TypeError):
        return Quorum(-1, epoch, (), 0)
    if saved_epoch != epoch:
        return Quorum(-1, epoch, voters, 0)
    return Quorum(leader, epoch, voters, 0)


def _apply(image: MetadataImage, entry: Entry, undecodable: list[Undecodable]) -> None:
    if isinstance(entry, Undecodable):
        undecodable.append(entry)
    elif not isinstance(entry, ControlRecord) or entry.name == "LeaderChangeMessage":
        image.apply(entry)
