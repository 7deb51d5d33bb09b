"""`zkcdc capture --source txnlog`: beside a ZooKeeper server (leader, follower or observer:
each logs every committed transaction), its newest snapshot, then its transaction logs, followed
as they are written. No ZooKeeper session: nothing on the ensemble.

Restarts resume after the last zxid given out (the checkpointed tree plus the event log's tail);
if the logs no longer reach back that far (purged while zkcdc was down), the newest snapshot is
compared with what is known, as the watch mode re-syncs, and the gap shows as versions_skipped."""

from __future__ import annotations

import time
from pathlib import Path

from zkcdc.capture.collector_pacing import CollectorPacing
from zkcdc.capture.delivery.record_outlet import RecordOutlet
from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.runner import CaptureDaemon, excluded_paths, warn_if_not_kafka
from zkcdc.capture.txnlog.data_dir import (
    HistoryGap,
    LogDamage,
    LogReader,
    start_snapshot,
    version_dir,
)
from zkcdc.capture.txnlog.dir_wakeup import DirectoryWakeup
from zkcdc.capture.txnlog.history import cluster_id_in
from zkcdc.capture.txnlog.txn_tracker import TxnTracker
from zkcdc.ground import logs, systemd_notify

log = logs.get("zkcdc.capture")

_BATCH = 20_000  # transactions per turn
_SLOW_TURN_S = 0.1  # a turn longer than this is logged: the records of it wait that long
_IDLE_S = 0.1  # longest wait for a write: how soon a SIGTERM is noticed


class TxnlogCaptureDaemon(CaptureDaemon):
    def run(self) -> None:
        s = self.settings
        assert s.zk_data_dir is not None
        directory = version_dir(s.zk_data_dir)
        chroot = s.kafka_chroot()
        cluster = s.cluster or cluster_id_in(directory, chroot)
        server = None
        try:
            server = self._prepare_outputs(1_000_000 if s.wait else 0)
            self._connected = self._active = True
            self.metrics.active.set(1)
            self._follow(directory, chroot, cluster)
        finally:
            if server is not None:
                server.shutdown()
            self._finished.set()

    def _follow(self, directory: Path, chroot: str, cluster: str) -> None:
        s = self.settings
        outlet = RecordOutlet(s, cluster, self.metrics, self._now)
        state = outlet.load()
        outlet.open()
        excluded = excluded_paths(chroot, s.ha_path)
        tracker = TxnTracker(state, self.now_ms, chroot, excluded, s.redact())
        reader: LogReader | None = None
        wakeup = DirectoryWakeup(directory, s.poll_interval_s)
        collector = CollectorPacing()
        collector.open()
        failing = True
        try:
            records, reader = self._start(directory, tracker)
            warn_if_not_kafka(state.tree, f"{reader.directory} {chroot or '/'}")
            collector.settle()  # the snapshot's tree: long-lived, walked once, not every pause
            log.info(
                "capturing",
                cluster=cluster,
                source="txnlog",
                zk_data_dir=str(reader.directory),
                chroot=chroot or "/",
                zxid=hex(state.zxid),
                seq=state.seq,
                known_znodes=len(state.tree),
                topic=s.topic if outlet.publisher else None,
                event_log=str(s.event_log_path(cluster)),
            )
            next_heartbeat = self._now() + s.heartbeat_s
            systemd_notify.notify("READY=1\nSTATUS=following ZooKeeper's transaction log")
            while not self._stop.is_set():
                self.turned()
                started, cpu = time.perf_counter(), time.thread_time()
                batch = reader.poll(_BATCH)
                read = time.perf_counter()
                for txn in batch:
                    records.extend(tracker.apply(txn))
                applied = time.perf_counter()
                now = self._now()
                # Heartbeats say "nothing else up to now": only once caught up with the log,
                # never between transactions of the past (their time is ZooKeeper's).
                if now >= next_heartbeat and len(batch) < _BATCH:
                    records.append(tracker.heartbeat())
                    next_heartbeat = now + s.heartbeat_s
                count = len(records)
                if records:
                    outlet.give_out(records)
                    records = []
                outlet.tick(state)
                collector.tick()
                done = time.perf_counter()
                if done - started > _SLOW_TURN_S:
                    log.warning(
                        "slow turn",
                        read_ms=round(1000 * (read - started)),
                        apply_ms=round(1000 * (applied - read)),
                        out_ms=round(1000 * (done - applied)),
                        # Far below the wall time: the turn waited for a CPU, not on its work.
                        cpu_ms=round(1000 * (time.thread_time() - cpu)),
                        transactions=len(batch),
                        records=count,
                    )
                if not batch:
                    # Records in flight: back soon for their acks (the lag metric is taken at
                    # the ack). Otherwise until ZooKeeper writes, or the next heartbeat is due.
                    due = next_heartbeat - self._now()
                    wakeup.wait(s.poll_interval_s if outlet.in_flight else min(due, _IDLE_S))
            failing = False
        finally:
            collector.close()
            wakeup.close()
            if reader is not None:
                reader.close()
            outlet.close(state, failing)

    def _start(self, directory: Path, tracker: TxnTracker) -> tuple[list[ChangeRecord], LogReader]:
        """Where the log takes over: after the last zxid given out, or after a snapshot."""
        state = tracker.state
        if state.zxid:
            try:
                return [], LogReader(directory, state.zxid, self._damaged)
            except HistoryGap as exc:
                log.warning(
                    "transactions lost while stopped: re-syncing from a snapshot", reason=str(exc)
                )
        snapshot = start_snapshot(directory, lambda problem: log.warning(problem))
        records = tracker.load_snapshot(snapshot)
        log.info("snapshot read", zxid=hex(snapshot.zxid), records=len(records))
        return records, LogReader(directory, snapshot.zxid, self._damaged)

    def _damaged(self, damage: LogDamage) -> None:
        log.error(
            "transaction log damaged: entry skipped, never given out", detail=damage.describe()
        )
