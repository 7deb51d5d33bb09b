"""What a capture daemon persists so a restart continues where it stopped.

- `tree.avro`: the known tree at some seq (written now and then, atomically, off the hot path);
- `delivered.json`: the highest seq Kafka acknowledged with everything before it (every second);
- the event log itself, the record of everything given out: replaying its tail over the tree
  brings the state to the last seq, and its records past `delivered` are the backlog."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import fastavro

from zkcdc.capture import failpoints
from zkcdc.capture.delivery.event_log import Damage, first_seq, log_files, read_records
from zkcdc.capture.errors import CaptureError
from zkcdc.capture.records import Znode
from zkcdc.capture.tracker import TrackerState, apply_records
from zkcdc.ground import logs
from zkcdc.ground.private_files import atomic_write

log = logs.get("zkcdc.capture")

TREE_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "KnownZnode",
        "namespace": "io.zkcdc.checkpoint",
        "fields": [
            {"name": "path", "type": "string"},
            {"name": "data", "type": ["null", "bytes"]},
            {"name": "version", "type": "int"},
            {"name": "czxid", "type": "long"},
            {"name": "mzxid", "type": "long"},
            {"name": "ctime_ms", "type": "long"},
            {"name": "mtime_ms", "type": "long"},
            {"name": "ephemeral_owner", "type": "long"},
        ],
    }
)


class CheckpointError(CaptureError):
    """The daemon's saved state cannot be read or written."""


def _atomic_write(path: Path, write: Any, failpoint: str) -> None:
    """The whole new file or the old one, also after a power loss. Raises CheckpointError; a
    failed write leaves no temporary file."""
    try:
        atomic_write(path, write, before_rename=lambda: failpoints.hit(failpoint))
    except OSError as exc:
        raise CheckpointError(f"cannot write {path}: {exc.strerror}") from exc


def _in_background(
    path: Path, write: Any, failpoint: str, written: Callable[[], None] = lambda: None
) -> threading.Thread:
    """A checkpoint written off the capture loop, `written` called once it is. A failure there
    is logged, not raised: the previous checkpoint stays valid (the event log holds everything
    after it), and the next one is tried at its time."""

    def run() -> None:
        try:
            _atomic_write(path, write, failpoint)
        except CheckpointError as exc:
            log.warning("checkpoint not written", reason=str(exc))
        else:
            written()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# The most of the time between two saved trees that writing one may take. The tree is walked
# and encoded in Python (~25 s of a core at 2,000,000 znodes): written every `checkpoint_s`, an
# idle capture of a large cluster kept a core busy writing it again and again, beside the
# alert job it shares a machine with.
TREE_WRITE_SHARE = 0.1


class SavedTree(NamedTuple):
    """What the last tree written holds (as of which seq and mode), and when its writing began
    (the caller's clock)."""

    seq: int
    mode: str
    at: float


class CheckpointStore:
    def __init__(
        self,
        directory: Path,
        event_log: Path,
        cluster: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.cluster = cluster
        self.event_log = event_log
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot create state folder {directory}: {exc.strerror}"
            ) from exc
        self._tree_file = directory / "tree.avro"
        self._delivered_file = directory / "delivered.json"
        self._writing: threading.Thread | None = None
        self._delivering: threading.Thread | None = None
        self._clock = clock
        self._tree_write_s = 0.0  # how long the last tree took to write
        self.saved_tree: SavedTree | None = None  # this run's last tree written, if any

    def next_tree_in(self, every_s: float) -> float:
        """Seconds until the next tree is due: `every_s`, or longer where writing the last one
        took more than TREE_WRITE_SHARE of that."""
        return max(every_s, self._tree_write_s / TREE_WRITE_SHARE)

    # -- delivered ----------------------------------------------------------------------
    def delivered(self) -> int:
        try:
            return int(json.loads(self._delivered_file.read_text())["acked_through"])
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{self._delivered_file} is unreadable: {exc}") from exc

    def save_delivered(self, acked_through: int, background: bool = False) -> None:
        """Background: off the capture loop (an fsync beside a busy ZooKeeper can be long);
        skipped while the previous one is still being written, the next call catches up."""
        body = json.dumps({"acked_through": acked_through}).encode()
        point = "checkpoint.delivered"
        if not background:
            _atomic_write(self._delivered_file, lambda s: s.write(body), point)
            return
        if self._delivering is not None and self._delivering.is_alive():
            return
        self._delivering = _in_background(self._delivered_file, lambda s: s.write(body), point)

    # -- tree ---------------------------------------------------------------------------
    def save_tree(
        self,
        seq: int,
        tree: dict[str, Znode],
        background: bool,
        zxid: int = 0,
        mode: str = "",
        at: float = 0.0,
    ) -> None:
        """Writes the tree as of `seq` (and, in txnlog mode, of `zxid`); `tree` must not change
        afterwards (pass a copy). Once written, `saved_tree` says so, with `at`."""
        if self._writing is not None and self._writing.is_alive():
            return  # the previous one is still being written; the next turn saves
        saved = SavedTree(seq, mode, at)

        def written() -> None:
            self.saved_tree = saved

        # `tree` is walked where it is written, off the capture loop: a list of its items made
        # here took the loop ~250 ms at 2,000,000 znodes, every checkpoint.
        def write(stream: Any) -> None:
            started = self._clock()
            writer = fastavro.write.Writer(
                stream,
                TREE_SCHEMA,
                metadata={
                    "zkcdc.cluster": self.cluster,
                    "zkcdc.seq": str(seq),
                    "zkcdc.zxid": str(zxid),
                    "zkcdc.mode": mode,
                },
            )
            for path, z in tree.items():
                writer.write({"path": path, **z.__dict__})
            writer.flush()
            self._tree_write_s = self._clock() - started

        if background:
            self._writing = _in_background(self._tree_file, write, "checkpoint.tree", written)
        else:
            self.wait()
            _atomic_write(self._tree_file, write, "checkpoint.tree")
            written()

    def wait(self) -> None:
        for thread in (self._writing, self._delivering):
            if thread is not None:
                thread.join()

    def load(self, on_damage: Any = None) -> TrackerState:
        """The state as of the last record given out: the saved tree, then the log's tail."""
        cluster = self.cluster
        state = TrackerState(cluster=cluster)
        if self._tree_file.exists():
            try:
                with self._tree_file.open("rb") as stream:
                    reader = fastavro.reader(stream)
                    meta = reader.metadata
                    if meta.get("zkcdc.cluster") != cluster:
                        raise CheckpointError(
                            f"{self._tree_file} belongs to cluster {meta.get('zkcdc.cluster')!r}, "
                            f"not {cluster!r}"
                        )
                    state.seq = int(meta["zkcdc.seq"])
                    state.zxid = int(meta.get("zkcdc.zxid", "0"))
                    state.mode = str(meta.get("zkcdc.mode", ""))
                    for item in reader:
                        assert isinstance(item, dict)
                        path = item.pop("path")
                        state.tree[path] = Znode(**item)
            except (OSError, ValueError, EOFError) as exc:
                raise CheckpointError(f"{self._tree_file} is unreadable: {exc}") from exc
        apply_records(state, self.records_after(state.seq, on_damage))
        return state

    def records_after(self, seq: int, on_damage: Any = None) -> Iterator[dict[str, Any]]:
        """The log's records with a seq above `seq`, skipping files that end before it."""
        if not self.event_log.exists():
            return
        files = log_files(self.event_log, self.cluster)
        firsts = [first_seq(f) for f in files]
        start = 0
        for i, first in enumerate(firsts):
            if first is not None and first <= seq + 1:
                start = i
        for file in files[start:]:
            for record in read_records(file, on_damage or _ignore):
                if record["seq"] > seq:
                    yield record


def _ignore(damage: Damage) -> None:
    pass
