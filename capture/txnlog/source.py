"""The txnlog source (`--source txnlog`): beside a ZooKeeper server (leader, follower or
observer: each logs every committed transaction), its newest snapshot, then its transaction
logs, followed as they are written. No ZooKeeper session: nothing on the ensemble, and no
election (one daemon a server).

Restarts resume after the last zxid given out (the checkpointed tree plus the event log's tail);
if the logs no longer reach back that far (purged while zkcdc was down), the newest snapshot is
compared with what is known, as the watch source re-syncs, and the gap shows as
versions_skipped."""

from __future__ import annotations

import time
from collections.abc import Callable

from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.settings import CaptureSettings
from zkcdc.capture.source import Turn
from zkcdc.capture.tracker import TrackerState
from zkcdc.capture.txnlog.data_dir import (
    HistoryGap,
    LogDamage,
    LogReader,
    newest_zxid,
    start_snapshot,
    version_dir,
)
from zkcdc.capture.txnlog.dir_wakeup import DirectoryWakeup
from zkcdc.capture.txnlog.history import cluster_id_in
from zkcdc.capture.txnlog.txn_tracker import TxnTracker
from zkcdc.ground import logs

log = logs.get("zkcdc.capture")

_BATCH = 20_000  # transactions a turn


class TxnlogSource:
    name = "txnlog"
    elected = False
    quick_acks = True

    def __init__(self, settings: CaptureSettings, now_ms: Callable[[], int]) -> None:
        assert settings.zk_data_dir is not None
        self._settings = settings
        self._now_ms = now_ms
        self._directory = version_dir(settings.zk_data_dir)
        self._chroot = settings.kafka_chroot()
        self._tracker: TxnTracker | None = None
        self._reader: LogReader | None = None
        self._wakeup: DirectoryWakeup | None = None
        self._pending: list[ChangeRecord] | None = None  # the snapshot's, for the first turn

    def open(self) -> str:
        return self._settings.cluster or cluster_id_in(self._directory, self._chroot)

    def start(self, state: TrackerState) -> None:
        s = self._settings
        excluded = s.excluded_paths(self._chroot)
        self._tracker = TxnTracker(state, self._now_ms, self._chroot, excluded, s.redact())
        self._wakeup = DirectoryWakeup(self._directory, s.poll_interval_s)
        self._pending, self._reader = self._snapshot_or_resume(self._tracker)

    def poll(self, max_wait_s: float) -> Turn:
        tracker, reader, wakeup = self._tracker, self._reader, self._wakeup
        assert tracker is not None and reader is not None and wakeup is not None
        if self._pending is not None:
            first, self._pending = self._pending, None
            return Turn(first, caught_up=False, synced=True)
        batch = reader.poll(_BATCH)
        if not batch:
            started = time.perf_counter()
            wakeup.wait(max_wait_s)  # until ZooKeeper writes, or the wait is over
            return Turn([], caught_up=True, waited_s=time.perf_counter() - started)
        records: list[ChangeRecord] = []
        for txn in batch:
            records.extend(tracker.apply(txn))
        # Heartbeats only once caught up with the log, never between transactions of the
        # past (their time is ZooKeeper's).
        return Turn(records, caught_up=len(batch) < _BATCH)

    def heartbeat(self) -> ChangeRecord:
        assert self._tracker is not None
        return self._tracker.heartbeat()

    def wake(self) -> None:
        """Nothing to do: a wait is at most one poll interval or heartbeat."""

    def close(self) -> None:
        if self._wakeup is not None:
            self._wakeup.close()
        if self._reader is not None:
            self._reader.close()

    @property
    def connected(self) -> bool:
        return True

    @property
    def position(self) -> dict[str, object]:
        zxid = 0 if self._tracker is None else self._tracker.state.zxid
        return {"zxid": hex(zxid), "chroot": self._chroot or "/"}

    @property
    def where(self) -> str:
        return f"{self._directory} {self._chroot or '/'}"

    def _snapshot_or_resume(self, tracker: TxnTracker) -> tuple[list[ChangeRecord], LogReader]:
        """Where the log takes over: after the last zxid given out, or after a snapshot."""
        state = tracker.state
        noted: list[ChangeRecord] = []
        newest = newest_zxid(self._directory) if state.zxid else 0
        if state.zxid and newest < state.zxid:
            # Another history (the data dir rebuilt, or restored from a backup): the saved
            # position is past its end, and its transactions would all look old.
            reason = (
                f"ZooKeeper's data dir {self._directory} ends at zxid {newest:#x}, behind the "
                f"{state.zxid:#x} capture recorded: its history is not the one capture saved (an "
                f"ensemble rebuilt or restored from a backup); every difference from the saved "
                f"tree is recorded"
            )
            log.warning("zookeeper history changed", newest_zxid=newest, recorded_zxid=state.zxid,
                        data_dir=str(self._directory))  # fmt: skip
            noted.append(tracker.history_changed(reason))
        elif state.zxid:
            try:
                return [], LogReader(self._directory, state.zxid, _damaged)
            except HistoryGap as exc:
                log.warning(
                    "transactions lost while stopped: re-syncing from a snapshot", reason=str(exc)
                )
        snapshot = start_snapshot(self._directory, lambda problem: log.warning(problem))
        records = noted + tracker.load_snapshot(snapshot)
        log.info("snapshot read", zxid=hex(snapshot.zxid), records=len(records))
        return records, LogReader(self._directory, snapshot.zxid, _damaged)


def _damaged(damage: LogDamage) -> None:
    log.error("transaction log damaged: entry skipped, never given out", detail=damage.describe())
