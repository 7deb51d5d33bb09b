"""What Kafka has not taken yet, in bounded memory: records go to the publisher while it has room;
past that (a long Kafka outage under a storm, a restart's backlog) they wait in the event log,
which holds them anyway, and are read back from it in seq order as room comes. So memory stays
flat however long Kafka is away, and nothing is lost or sent out of order."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from zkcdc.capture.delivery.publisher import Publisher
from zkcdc.ground import logs

log = logs.get("zkcdc.capture")

ReadAfter = Callable[[int], Iterator[dict[str, Any]]]

# Records read back from the log per step: small enough to check the turn's time budget often.
_REFILL_STEP = 1_000


class KafkaFeed:
    def __init__(
        self,
        publisher: Publisher,
        read_after: ReadAfter,
        budget_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`read_after(seq)`: the event log's records with a seq above `seq`, in order.
        `budget_s`: how long one refill may take; librdkafka takes up to 100,000 records at
        once, and moving them all in one turn would hold the capture's loop for seconds."""
        self.publisher = publisher
        self._read_after = read_after
        self._budget_s = budget_s
        self._clock = clock
        self._next: int | None = None  # from this seq on, records wait in the log
        self._skip: set[int] = set()  # seqs among those that Kafka already has
        self._cursor: Iterator[dict[str, Any]] | None = None

    @property
    def waiting_in_log(self) -> bool:
        return self._next is not None

    def give(self, values: list[dict[str, Any]], encoded: list[bytes] | None) -> None:
        """Records just logged: to the publisher, or left in the log if they must wait."""
        if self._next is None and self.publisher.room >= len(values):
            self.publisher.publish(values, encoded)
            return
        if self._next is None:
            self._next = values[0]["seq"]
            log.warning(
                "Kafka is behind: records wait in the event log until it takes them",
                from_seq=self._next,
                held_in_memory=self.publisher.backlog,
            )

    def resume(self, after_seq: int, on_kafka: set[int]) -> None:
        """A restart: the log's records after `after_seq` go out (those in `on_kafka` not)."""
        self._next, self._skip, self._cursor = after_seq + 1, on_kafka, None

    def refill(self, logged_seq: int) -> None:
        """Reads waiting records back from the log into the publisher's room; back to direct
        giving once everything up to `logged_seq` (the log's last record) went out. Stops
        after its time budget: the next turn goes on from where it left."""
        deadline = self._clock() + self._budget_s
        while self._next is not None:
            room = self.publisher.room
            if room <= 0:
                return
            fresh = self._cursor is None
            if self._cursor is None:
                self._cursor = self._read_after(self._next - 1)
            batch = list(itertools.islice(self._cursor, min(room, _REFILL_STEP)))
            if not batch:
                # The cursor saw the log's end as it was when it got there; a file begun since
                # (rotation) is picked up by a new one. Single-threaded: nothing was logged
                # while it read, so past `logged_seq` means caught up; so does a new cursor
                # finding nothing (records a standby took over from the topic are on Kafka).
                self._cursor = None
                if self._next > logged_seq or fresh:
                    log.info("Kafka caught up with the event log", seq=logged_seq)
                    self._next, self._skip = None, set()
                    continue
                return
            self._next = batch[-1]["seq"] + 1
            missing = [r for r in batch if r["seq"] not in self._skip]
            if missing:
                self.publisher.publish(missing)
            if self._clock() > deadline:
                return  # at least one step a turn, so the log always drains
