"""The changes topic as capture keys its records for: there, with the partition count it had.

Records are keyed by path so that one znode's records share a partition and keep their order;
a topic deleted under capture (and re-made by someone, maybe with one partition and a broker's
1 MB message limit) or given more partitions would scatter a path's records. Capture never
lets a broker auto-create the topic (`allow.auto.create.topics=false` on its clients), checks
the topic now and then and on a delivery error, and stops with one line naming the topic and
what changed. The count is kept in the state dir, so a restart into a changed topic is refused
too, unless the operator says `--accept-partition-count`. The event log keeps every record
meanwhile: nothing is lost, the next run publishes it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zkcdc.capture.delivery.publisher import DeliveryError
from zkcdc.ground.private_files import atomic_write

CHECK_EVERY_S = 5.0
SAVED = "changes-topic.json"


class TopicChangedError(DeliveryError):
    """The changes topic is gone, or its partition count is not the one records are keyed for."""


def partition_count(client: Any, topic: str, timeout_s: float) -> int | None:
    """The topic's partition count, None when it does not exist (any librdkafka client)."""
    found = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return None
    return len(found.partitions)


def saved_count(state_dir: Path, topic: str) -> int | None:
    try:
        saved = json.loads((state_dir / SAVED).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("topic") != topic:
        return None
    count = saved.get("partitions")
    return count if isinstance(count, int) else None


def save_count(state_dir: Path, topic: str, partitions: int) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(state_dir / SAVED, json.dumps({"topic": topic, "partitions": partitions}))


def starting_count(state_dir: Path, topic: str, now_count: int, accept: bool) -> int:
    """The count to key for from now on: the topic's, unless it differs from what the last run
    keyed for and the operator has not accepted that."""
    before = saved_count(state_dir, topic)
    if before is not None and before != now_count and not accept:
        raise TopicChangedError(
            f"changes topic {topic} has {now_count} partition(s), but capture keyed its records "
            f"for {before}: one path's records would no longer share a partition (their order "
            f"breaks); restore {before} partitions, or give --accept-partition-count"
        )
    save_count(state_dir, topic, now_count)
    return now_count


class TopicGuard:
    def __init__(
        self,
        client: Any,
        topic: str,
        partitions: int,
        timeout_s: float,
        now: Callable[[], float],
        every_s: float = CHECK_EVERY_S,
    ) -> None:
        self._client = client
        self.topic = topic
        self.partitions = partitions
        self._timeout_s = timeout_s
        self._now = now
        self._every_s = every_s
        self._next = now() + every_s

    def check(self, force: bool = False) -> None:
        """Raises TopicChangedError when the topic is gone or re-partitioned; a Kafka that does
        not answer is not a change (the producer holds its records meanwhile)."""
        if not force and self._now() < self._next:
            return
        self._next = self._now() + self._every_s
        try:
            count = partition_count(self._client, self.topic, self._timeout_s)
        except Exception:  # unreachable or slow: the brokers being away is no topic change
            return
        if count is None:
            raise TopicChangedError(
                f"changes topic {self.topic} is gone (deleted under capture; it had "
                f"{self.partitions} partition(s)): nothing is lost, the event log keeps every "
                f"record; restart capture to re-create it, or re-create it yourself with "
                f"{self.partitions} partitions"
            )
        if count != self.partitions:
            raise TopicChangedError(
                f"changes topic {self.topic} now has {count} partition(s), not the "
                f"{self.partitions} capture keys its records for: one path's records would no "
                f"longer share a partition; capture stopped (restart with "
                f"--accept-partition-count to publish into it anyway)"
            )
