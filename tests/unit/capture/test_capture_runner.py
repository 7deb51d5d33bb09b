"""The capture runner runs any source that keeps the Source interface: a scripted source, with
no ZooKeeper behind it, gets its snapshot and changes into the event log in order, with
heartbeats only once it is caught up."""

from __future__ import annotations

import threading
from pathlib import Path

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.capture.delivery.transactions import TransactionLost
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.capture.runner import CaptureRunner, heartbeat_due
from zkcdc.capture.settings import load_settings
from zkcdc.capture.source import Source, Turn
from zkcdc.capture.tracker import Tracker, TrackerState
from zkcdc.capture.txnlog.source import TxnlogSource
from zkcdc.capture.watch.source import WatchSource


def _znode(version: int, data: bytes) -> Znode:
    return Znode(data=data, version=version, czxid=1, mzxid=10 + version)


class ScriptedSource:
    """A snapshot of two znodes, then one change, then nothing; the runner is stopped once
    it has polled the quiet source a few times."""

    name = "scripted"
    elected = False
    quick_acks = False

    def __init__(self, stop: threading.Event, lose_producer_at: int = 0) -> None:
        self._stop = stop
        self._lose_producer_at = lose_producer_at  # the turn whose records' producer is lost
        self.opened = self.closed = False
        self._tracker: Tracker | None = None
        self._turn = 0
        self.caught_up_polls = 0

    def open(self) -> str:
        self.opened = True
        return "c1"

    def start(self, state: TrackerState) -> None:
        self._tracker = Tracker(state, lambda: 1_000)

    def poll(self, max_wait_s: float) -> Turn:
        tracker = self._tracker
        assert tracker is not None
        self._turn += 1
        if self._turn == self._lose_producer_at:
            raise TransactionLost("scripted: the producer's transaction is beyond saving")
        if self._turn == 1:  # the snapshot: not caught up until it ends
            tracker.begin_sync()
            reads = tracker.read("/brokers", _znode(0, b"")) + tracker.read("/a", _znode(0, b"0"))
            return Turn(reads + tracker.end_sync(), caught_up=False, synced=True)
        if self._turn == 2:
            return Turn(tracker.read("/a", _znode(1, b"1")))
        self.caught_up_polls += 1
        if self.caught_up_polls >= 5:
            self._stop.set()
        self._stop.wait(max_wait_s)
        return Turn()

    def heartbeat(self) -> ChangeRecord:
        assert self._tracker is not None
        return self._tracker.heartbeat()

    def wake(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    @property
    def connected(self) -> bool:
        return True

    @property
    def position(self) -> dict[str, object]:
        return {"turn": self._turn}

    @property
    def where(self) -> str:
        return "a script"


def test_a_new_source_plugs_into_the_runner_and_its_records_reach_the_event_log_in_order(
    tmp_path: Path,
) -> None:
    settings = load_settings(None, zookeeper="127.0.0.1:1", state_dir=tmp_path, heartbeat_s=0.001)
    stopped = threading.Event()
    source = ScriptedSource(stopped)
    runner = CaptureRunner(settings, source)
    threading.Thread(target=lambda: (stopped.wait(30), runner.stop()), daemon=True).start()
    runner.run()

    records = list(read_records(settings.event_log_path("c1")))
    ops = [(r["op"], r["path"]) for r in records]
    assert ops[:3] == [("READ", "/brokers"), ("READ", "/a"), ("UPDATE", "/a")]
    assert ("HEARTBEAT", "") in ops[3:], "heartbeats once caught up"
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


def test_a_log_source_whose_producer_is_lost_captures_on_with_a_new_source_losing_nothing(
    tmp_path: Path,
) -> None:
    """No election to go back to (a log's source): the term ends with its producer and a new
    one starts at once, as a restart would, rather than the daemon exiting."""
    settings = load_settings(None, zookeeper="127.0.0.1:1", state_dir=tmp_path, heartbeat_s=0.001)
    stopped = threading.Event()
    first, second = ScriptedSource(stopped, lose_producer_at=2), ScriptedSource(stopped)
    runner = CaptureRunner(settings, first, new_source=lambda: second)
    threading.Thread(target=lambda: (stopped.wait(30), runner.stop()), daemon=True).start()
    runner.run()

    assert first.closed and second.opened and second.caught_up_polls >= 5
    records = list(read_records(settings.event_log_path("c1")))
    ops = [(r["op"], r["path"]) for r in records]
    assert ops[:3] == [("READ", "/brokers"), ("READ", "/a"), ("UPDATE", "/a")]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


def test_the_watch_and_txnlog_sources_keep_the_source_interface() -> None:
    members = [m for m in dir(Source) if not m.startswith("_")]
    members += ["name", "elected", "quick_acks"]
    for source in (WatchSource, TxnlogSource, ScriptedSource):
        missing = [m for m in members if not hasattr(source, m)]
        assert not missing, f"{source.__name__} lacks {missing}"
        assert "run" not in vars(source), "a source is run by the runner, never runs itself"


def test_a_heartbeat_round_goes_out_when_due_or_half_an_interval_early_with_records() -> None:
    due_at, interval = 10.0, 1.0
    assert heartbeat_due(10.0, due_at, interval, giving_out=False)
    assert heartbeat_due(10.3, due_at, interval, giving_out=False)
    assert not heartbeat_due(9.9, due_at, interval, giving_out=False), "quiet: on time only"
    assert heartbeat_due(9.5, due_at, interval, giving_out=True), "with records, half early"
    assert heartbeat_due(9.9, due_at, interval, giving_out=True)
    assert not heartbeat_due(9.4, due_at, interval, giving_out=True), "never more than half"
