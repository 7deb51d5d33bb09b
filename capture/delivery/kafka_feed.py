"""What Kafka has not taken yet, in bounded memory: records go to the publisher while it has room;
past that (a long Kafka outage under a storm, a restart's backlog) they wait in the event log,
which holds them anyway, and are read back from it in seq order as room comes. So memory stays
flat however long Kafka is away, and nothing is lost or sent out of order."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from zkcdc.capture.delivery.publisher import Publisher
from zkcdc.ground import logs

log = logs.get("zkcdc.capture")


class Tail(Protocol):
    """The event log read on from a seq (`log_tail.LogTail`)."""

    def take(self, limit: int) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


OpenTail = Callable[[int], Tail]

# Records read back from the log per step: small enough to check the turn's time budget often.
_REFILL_STEP = 1_000


class KafkaFeed:
    def __init__(
        self,
        publisher: Publisher,
        open_tail: OpenTail,
        budget_s: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`open_tail(seq)`: the event log read on from the records with a seq above `seq`.
        `budget_s`: how long one refill may take; librdkafka takes up to 100,000 records at
        once, and moving them all in one turn would hold the capture's loop for seconds."""
        self.publisher = publisher
        self._open_tail = open_tail
        self._budget_s = budget_s
        self._clock = clock
        self._next: int | None = None  # from this seq on, records wait in the log
        self._skip: set[int] = set()  # seqs among those that Kafka already has
        self._tail: Tail | None = None

    @property
    def waiting_in_log(self) -> bool:
        return self._next is not None

    def _drop_tail(self) -> None:
        if self._tail is not None:
            self._tail.close()
            self._tail = None

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
        self._drop_tail()
        self._next, self._skip = after_seq + 1, on_kafka

    def refill(self, logged_seq: int) -> None:
        """Reads waiting records back from the log into the publisher's room; back to direct
        giving once everything up to `logged_seq` (the log's last record) went out. Stops
        after its time budget: the next turn goes on from where it left."""
        deadline = self._clock() + self._budget_s
        while self._next is not None:
            room = self.publisher.room
            if room <= 0:
                return
            fresh = self._tail is None
            if self._tail is None:
                self._tail = self._open_tail(self._next - 1)
            batch = self._tail.take(min(room, _REFILL_STEP))
            if not batch:
                # Past `logged_seq` means caught up (single-threaded: nothing is logged while
                # this reads); so does a new tail finding nothing (records a standby took over
                # from the topic are on Kafka, or what is left is damaged).
                if self._next > logged_seq or fresh:
                    log.info("Kafka caught up with the event log", seq=logged_seq)
                    self._drop_tail()
                    self._next, self._skip = None, set()
                    continue
                self._drop_tail()  # a fresh look from `_next` the next turn
                return
            self._next = batch[-1]["seq"] + 1
            missing = [r for r in batch if r["seq"] not in self._skip]
            if missing:
                self.publisher.publish(missing)
            if self._clock() > deadline:
                return  # at least one step a turn, so the log always drains
