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
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zkcdc.capture.delivery.delivery_errors import DeliveryError
from zkcdc.ground import waiting
from zkcdc.ground.private_files import atomic_write

CHECK_EVERY_S = 5.0
# Answers in a row that must agree before the topic counts as gone or resized: a broker that
# has just started answers "no such topic" until its metadata cache is filled.
CONFIRM = 4
SAVED = "changes-topic.json"
SLOW_ANSWER_S = 2.0  # a metadata request unanswered this long: the brokers are not answering


class TopicChangedError(DeliveryError):
    """The changes topic is gone, or its partition count is not the one records are keyed for."""


class TopicUnanswered(DeliveryError):
    """Kafka gave no usable answer about the topic yet: no answer, a partition without a
    leader, a broker that has just started. Asking again may cure it."""


class TopicRefused(DeliveryError):
    """Kafka refuses capture the topic's metadata (no Describe right on it): asking again
    will not cure it, and it is not a topic that is missing."""


def _refusal(topic: str, error: Any) -> TopicRefused | None:
    from confluent_kafka import KafkaError

    if error.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError.CLUSTER_AUTHORIZATION_FAILED):  # fmt: skip
        return TopicRefused(f"Kafka refuses the metadata of changes topic {topic}: {error.str()}")
    return None


def partition_count(client: Any, topic: str, timeout_s: float) -> int | None:
    """The topic's partition count, None when Kafka says it does not exist (any librdkafka
    client). Raises for any other answer (a leader not yet known, a broker starting)."""
    return topic_answer(client, topic, timeout_s)[0]


def topic_answer(client: Any, topic: str, timeout_s: float) -> tuple[int | None, bool]:
    """The topic's partition count (None: no such topic) and whether every partition has a
    leader. Raises when Kafka gives no usable answer."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        found = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        refused = _refusal(topic, exc.args[0])
        if refused is not None:
            raise refused from exc
        raise TopicUnanswered(f"metadata of {topic}: {exc}") from exc
    if found is None:
        return None, False
    if found.error is not None:
        if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None, False
        raise _refusal(topic, found.error) or TopicUnanswered(f"metadata of {topic}: {found.error}")
    if not found.partitions:
        raise TopicUnanswered(f"metadata of {topic}: no partitions listed")
    led = all(
        getattr(p, "leader", -1) >= 0 and getattr(p, "error", None) is None
        for p in found.partitions.values()
    )
    return len(found.partitions), led


def settled_count(client: Any, topic: str, timeout_s: float) -> int:
    """The partition count of a topic just made or found, once Kafka's metadata shows it (a
    topic created a moment ago is listed before its partitions have leaders)."""
    unanswered: list[TopicUnanswered] = []  # the latest look's, if it had no answer

    def count() -> int | None:
        unanswered.clear()
        try:
            return partition_count(client, topic, timeout_s)
        except TopicUnanswered as exc:  # a refusal (TopicRefused) is said at once
            unanswered.append(exc)
            return None

    try:
        return waiting.wait_until(count, timeout_s, what=f"topic {topic}", interval_s=0.5)
    except waiting.WaitFailed:
        if unanswered:
            raise TopicChangedError(f"changes topic {topic}: Kafka gave no usable answer "
                                    f"in {timeout_s:.0f} s ({unanswered[0]})") from None  # fmt: skip
        raise TopicChangedError(f"changes topic {topic} is not on Kafka (deleted as capture "
                                f"started?)") from None  # fmt: skip


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
    """Asks Kafka about the topic every `every_s` on a thread of its own: with the brokers away
    a metadata request waits its whole timeout, which capture's loop must never do (it keeps
    recording into the event log meanwhile). `check` raises what the last answer showed;
    `check(force=True)`, after a delivery error, asks at once."""

    def __init__(
        self,
        client: Any,
        topic: str,
        partitions: int,
        timeout_s: float,
        every_s: float = CHECK_EVERY_S,
        background: bool = True,
        confirm: int = CONFIRM,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._now = now
        # Since when every answer has shown the topic with a leader for each partition (None:
        # the last did not): how long the brokers have been back after an outage.
        self.answering_since: float | None = None
        self._asking_since: float | None = None  # a request under way, not yet answered
        self._confirm = confirm
        self._seen: list[str] = []  # the problem each answer in a row showed
        self.topic = topic
        self.partitions = partitions
        self._timeout_s = timeout_s
        self._every_s = every_s
        self._problem: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._watch, name="topic-guard", daemon=True)
            self._thread.start()

    def check(self, force: bool = False) -> None:
        """Raises TopicChangedError when the topic is gone or re-partitioned; a Kafka that does
        not answer is not a change (the producer holds its records meanwhile). `force` (a
        delivery error, the run ending anyway): asked at once, until the answers agree."""
        if force and self._problem is None:
            # Agreeing answers here too: a broker just restarted says "no such topic" until
            # its metadata comes (B6, all brokers restarted): a moment apart, on the way out.
            answers = []
            for n in range(self._confirm):
                if n:
                    self._stop.wait(1.0)
                answers.append(self._ask())
                if answers[-1] is None:
                    break
            if answers[-1] is not None and len(set(answers)) == 1:
                self._problem = answers[-1]
        if self._problem is not None:
            raise TopicChangedError(self._problem)

    def answering_for(self) -> float:
        """How long the brokers have answered for the topic in full, 0 when they do not."""
        since, asking, now = self.answering_since, self._asking_since, self._now()
        if since is None or (asking is not None and now - asking > SLOW_ANSWER_S):
            return 0.0  # the last answer was no answer, or the one asked for is late
        return now - since

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self._every_s) and self._problem is None:
            problem = self._ask()
            self._seen = [*self._seen, problem][-self._confirm :] if problem else []
            if len(self._seen) == self._confirm and len(set(self._seen)) == 1:
                self._problem = problem

    def _ask(self) -> str | None:
        """What one answer shows: the topic gone or resized, else None (also for no answer:
        the brokers being away is no topic change)."""
        asked = self._asking_since = self._now()
        try:
            count, led = topic_answer(self._client, self.topic, self._timeout_s)
        except TopicUnanswered:
            self.answering_since = None
            return None
        except TopicRefused as exc:
            self.answering_since = None
            return str(exc)  # the rights taken away: said once confirmed, as a change is
        finally:
            self._asking_since = None
        answered = self._now()
        if not led or count != self.partitions:
            self.answering_since = None
        elif self.answering_since is None or answered - asked > SLOW_ANSWER_S:
            # A late answer: the brokers were away while it waited (every one stopped, the
            # first back answered at last), so they have answered since now, not since before.
            self.answering_since = answered
        if count is None:
            return (
                f"changes topic {self.topic} is gone (deleted under capture; it had "
                f"{self.partitions} partition(s)): nothing is lost, the event log keeps every "
                f"record; restart capture to re-create it, or re-create it yourself with "
                f"{self.partitions} partitions"
            )
        if count != self.partitions:
            return (
                f"changes topic {self.topic} now has {count} partition(s), not the "
                f"{self.partitions} capture keys its records for: one path's records would no "
                f"longer share a partition; capture stopped (restart with "
                f"--accept-partition-count to publish into it anyway)"
            )
        return None
