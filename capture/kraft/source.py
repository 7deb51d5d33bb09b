"""The KRaft source (`--source kraft --metadata-log-dir DIR`): beside a KRaft controller or
broker, its copy of the metadata log (`__cluster_metadata-0`): the newest snapshot, then the
log after it, followed as Kafka writes it. No election: one daemon a node, as with txnlog.

Only committed records are given out: what the files hold past the quorum's high watermark
(asked with DescribeQuorum of `--bootstrap-controllers`, or of the brokers) waits until the
watermark passes it, and is checked to be still in its file (Raft cuts back an uncommitted tail
when a leader fails). Each record is applied once: the position is the last metadata offset
given out, restored from the checkpoint and the event log; a restart reads the log again up to
it to rebuild the image, giving nothing, and goes on after it. If retention removed that part
of the log meanwhile, the newest snapshot is compared with the known tree instead, and the
difference given out as the watch source's re-sync does."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.kraft_tracker import MODE as tracker_mode
from zkcdc.capture.kraft.kraft_tracker import KraftTracker
from zkcdc.capture.kraft.log_follower import MetadataLogFollower, MetadataLogGap
from zkcdc.capture.kraft.metadata_dir import load_image, snapshot_files
from zkcdc.capture.kraft.metadata_records import Entry, Undecodable, entries
from zkcdc.capture.kraft.quorum_client import QuorumClient, QuorumStatus, QuorumUnavailable
from zkcdc.capture.kraft.record_batches import Batch, BatchDamage
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.source import Turn
from zkcdc.capture.tracker import TrackerState
from zkcdc.capture.txnlog.dir_wakeup import DirectoryWakeup
from zkcdc.ground import logs, waiting

log = logs.get("zkcdc.capture")

_WARN_EVERY_S = 10.0


def cluster_id_of(directory: Path) -> str:
    """The KRaft cluster id from `meta.properties` beside the metadata log."""
    for candidate in (directory.parent / "meta.properties", directory / "meta.properties"):
        try:
            for line in candidate.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "cluster.id" and value.strip():
                    return value.strip()
        except OSError:
            continue
    raise CaptureError(
        f"no cluster.id in a meta.properties beside {directory}: name the cluster (--cluster NAME)"
    )


class QuorumStatusSource(Protocol):
    """Where the high watermark comes from: Kafka (QuorumClient), or a test's own."""

    def status(self) -> QuorumStatus: ...

    def close(self) -> None: ...


def servers(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host, int(port)))
    return out


class KraftSource:
    name = "kraft"
    elected = False
    quick_acks = True

    def __init__(
        self,
        settings: CaptureSettings,
        now_ms: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
        quorum: QuorumStatusSource | None = None,
    ) -> None:
        assert settings.metadata_log_dir is not None
        self._settings = settings
        self._now_ms = now_ms
        self._sleep = sleep
        self._directory = settings.metadata_log_dir
        if quorum is None:
            asked = settings.bootstrap_controllers or settings.bootstrap_servers
            if not asked:
                raise CaptureError(
                    "--source kraft needs --bootstrap-controllers or --bootstrap-servers"
                )
            quorum = QuorumClient(servers(asked))
        self._quorum = quorum
        self._high_watermark = 0
        self._tracker: KraftTracker | None = None
        self._follower: MetadataLogFollower | None = None
        self._wakeup: DirectoryWakeup | None = None
        self._held: list[tuple[Path, Batch, list[Entry]]] = []
        self._pending: list[ChangeRecord] | None = None
        self._last_warning = 0.0
        self._connected = True

    def open(self) -> str:
        if not self._directory.is_dir():
            raise CaptureError(
                f"no metadata log folder {self._directory}: --metadata-log-dir takes a KRaft "
                "node's __cluster_metadata-0"
            )
        return self._settings.cluster or cluster_id_of(self._directory)

    def start(self, state: TrackerState) -> None:
        tracker = KraftTracker(state, self._now_ms, self._settings.redact())
        self._tracker = tracker
        self._wakeup = DirectoryWakeup(self._directory, self._settings.poll_interval_s)
        if state.tree and state.mode not in ("", tracker_mode):
            self._pending = self._take_over(tracker, state.mode)
            return
        if state.tree and self._rebuild(tracker):
            self._pending = []
            return
        self._pending = self._snapshot(tracker)

    def _take_over(self, tracker: KraftTracker, mode: str) -> list[ChangeRecord]:
        """The stream of a cluster migrated from ZooKeeper, captured until now by a `mode`
        capture (same cluster id, same state or topic): the committed image compared with the
        tree that capture last gave, the differences given out as changes with the seq going
        on, then the log followed from there."""
        try:
            waiting.wait_until(
                self._ask_quorum, max(30.0, self._settings.connect_timeout_s * 3),
                what="a high watermark from the quorum", interval_s=0,
            )  # fmt: skip
        except waiting.WaitFailed:
            raise CaptureError(
                f"cannot take the stream over from the {mode} capture: no high watermark "
                "from the quorum (--bootstrap-controllers)"
            ) from None
        loaded = load_image(self._directory, upto=self._high_watermark)
        last = loaded.next_offset - 1
        records = tracker.load(loaded.image, last, self._now_ms())
        self._follower = MetadataLogFollower(self._directory, loaded.next_offset, _damaged)
        log.info("taking the stream over from a ZooKeeper capture", previous_source=mode,
                 metadata_offset=last, changes=len(records) - 1)  # fmt: skip
        return records

    def _rebuild(self, tracker: KraftTracker) -> bool:
        """The image as of the position (a restart); False when the log no longer has it."""
        wanted = tracker.next_offset
        loaded = load_image(self._directory, upto=wanted)
        if loaded.next_offset != wanted:
            log.warning(
                "metadata log no longer reaches the position: re-syncing from a snapshot",
                position=wanted - 1,
                log_reaches=loaded.next_offset,
            )
            return False
        tracker.adopt(loaded.image)
        self._follower = MetadataLogFollower(self._directory, wanted, _damaged)
        log.info("metadata image rebuilt", position=wanted - 1)
        return True

    def _snapshot(self, tracker: KraftTracker) -> list[ChangeRecord]:
        """The newest snapshot as the tree (READ the first time, the difference after a gap);
        the log is followed after it. Without a snapshot the log from offset 0 is all there is:
        its records come as changes."""
        snapshots = snapshot_files(self._directory)
        end = snapshots[-1].end_offset if snapshots else 0
        records: list[ChangeRecord] = []
        if snapshots:
            loaded = load_image(self._directory, upto=end)
            records = tracker.load(loaded.image, end - 1, self._now_ms())
        self._follower = MetadataLogFollower(self._directory, end, _damaged)
        log.info("snapshot read", end_offset=end, records=len(records))
        return records

    def poll(self, max_wait_s: float) -> Turn:
        tracker, follower, wakeup = self._tracker, self._follower, self._wakeup
        assert tracker is not None and follower is not None and wakeup is not None
        if self._pending is not None:
            first, self._pending = self._pending, None
            return Turn(first, caught_up=False, synced=True)
        try:
            for segment, batch in follower.poll():
                self._held.append((segment, batch, entries(batch)))
        except MetadataLogGap as exc:
            log.warning("metadata log gap: re-syncing from a snapshot", reason=str(exc))
            self._held.clear()
            return Turn(self._snapshot(tracker), caught_up=False, synced=True)
        if not self._held:
            started = time.perf_counter()
            wakeup.wait(max_wait_s)
            return Turn([], caught_up=True, waited_s=time.perf_counter() - started)
        if self._held[0][1].base_offset >= self._high_watermark and not self._ask_quorum():
            return Turn([], caught_up=False)
        records = self._give_committed(tracker, follower)
        if not records and self._held:
            self._sleep(self._settings.poll_interval_s)  # the watermark moves within ms
        return Turn(records, caught_up=not self._held)

    def _ask_quorum(self) -> bool:
        try:
            self._high_watermark = self._quorum.status().high_watermark
            self._connected = True
            return True
        except QuorumUnavailable as exc:
            self._connected = False
            if time.monotonic() - self._last_warning > _WARN_EVERY_S:
                self._last_warning = time.monotonic()
                log.warning("no high watermark from the quorum: records held back", reason=str(exc))
            self._sleep(min(0.5, self._settings.poll_interval_s * 50))
            return False

    def _give_committed(
        self, tracker: KraftTracker, follower: MetadataLogFollower
    ) -> list[ChangeRecord]:
        records: list[ChangeRecord] = []
        while self._held:
            segment, batch, held = self._held[0]
            committed = [e for e in held if e.offset < self._high_watermark]
            if not committed:
                break
            if not follower.still_there(segment, batch):
                log.warning(
                    "uncommitted metadata cut back: reading again", offset=batch.base_offset
                )
                self._held.clear()
                follower.restart_at(tracker.next_offset)
                break
            for entry in committed:
                if isinstance(entry, Undecodable):
                    log.error("metadata record undecodable: skipped", offset=entry.offset,
                              problem=entry.problem)  # fmt: skip
                records.extend(tracker.apply(entry))
            rest = held[len(committed) :]
            if rest:
                self._held[0] = (segment, batch, rest)
                break
            self._held.pop(0)
        return records

    def heartbeat(self) -> ChangeRecord:
        assert self._tracker is not None
        return self._tracker.heartbeat()

    def wake(self) -> None:
        """Nothing to do: a wait is at most one poll interval or heartbeat."""

    def close(self) -> None:
        for closable in (self._wakeup, self._follower, self._quorum):
            if closable is not None:
                closable.close()

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def position(self) -> dict[str, object]:
        offset = -1 if self._tracker is None else self._tracker.next_offset - 1
        return {"metadata_offset": offset, "high_watermark": self._high_watermark}

    @property
    def where(self) -> str:
        return str(self._directory)


def _damaged(damage: BatchDamage) -> None:
    log.error("metadata log damaged: batch skipped, never given out", detail=str(damage))
