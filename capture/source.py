"""What the capture runner runs: a source that reads a snapshot of Kafka's tree, then follows
every change after it (Debezium's snapshot-then-stream), turn by turn.

A source owns its reading (a ZooKeeper session and watches, a data dir's transaction logs,
and later Kafka's KRaft metadata log) and its tracker; the runner owns everything else: the
election, the outlet (event log, Kafka, checkpoint), heartbeats, health and stopping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from zkcdc.capture.records import ChangeRecord
from zkcdc.capture.tracker import TrackerState


@dataclass(frozen=True)
class Turn:
    """What one poll of a source gave: its records in order, whether it has read all there
    is (heartbeats say "nothing else up to now", so only then), and whether a full read of
    the tree (the snapshot, or a re-sync) ended in it. `waited_s`: how long of the poll was
    spent waiting for something to read (not work: the runner's slow-turn measure leaves it out)."""

    records: list[ChangeRecord] = field(default_factory=list)
    caught_up: bool = True
    synced: bool = False
    waited_s: float = 0.0


class Source(Protocol):
    name: str
    """`watch`, `txnlog`: in the log lines and the records' `source`."""
    elected: bool
    """Whether one daemon of a cluster captures at a time (the ZooKeeper election); a source
    read beside one server (txnlog) runs one daemon per server instead."""
    quick_acks: bool
    """Whether the runner polls for Kafka's acks every poll interval while records are in
    flight. Cheap where the source has no threads of its own (txnlog); where kazoo's threads
    answer watches, the extra turns take the GIL from them and the capture lags (B1)."""

    def open(self) -> str:
        """Connects; returns the cluster's name (configured, or the source's own id)."""

    def start(self, state: TrackerState) -> None:
        """Starts the snapshot from the state known (restored or followed)."""

    def poll(self, max_wait_s: float) -> Turn:
        """The records there are now; waits up to `max_wait_s` when there are none."""

    def heartbeat(self) -> ChangeRecord:
        """A record saying the source has seen nothing else up to now."""

    def wake(self) -> None:
        """Ends a poll's wait early (a stop)."""

    def close(self) -> None: ...

    @property
    def connected(self) -> bool:
        """For health: the source can read (a ZooKeeper session, the data dir)."""

    @property
    def position(self) -> dict[str, object]:
        """Where the source is (a zxid, a session), for the log lines."""

    @property
    def where(self) -> str:
        """What is read, for messages: a connect string, a data dir."""
