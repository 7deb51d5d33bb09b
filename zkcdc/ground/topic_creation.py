"""Creating topics on a cluster that may still be settling.

Right after a cluster starts, or while a broker comes and goes, Kafka refuses a CreateTopics
for reasons that pass within seconds: no controller yet (NOT_CONTROLLER), a request timed out,
or librdkafka dropping the broker the request was waiting on because another broker's
metadata did not list it yet (`_DESTROY_BROKER`, librdkafka 2.10 on; seen on a KRaft cluster
just up), or an unexpected error of the controller's (UNKNOWN_SERVER_ERROR: a ZooKeeper-mode
controller whose ZooKeeper has just come back from a stall answers so while its session is
renewed). Each of those is asked again, with a client of its own (a client once kept asking a
broker that was no longer the controller for its whole deadline), until the deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import TimeoutError as NoAnswer
from typing import Any

from zkcdc.ground.backoff import Backoff
from zkcdc.ground.errors import ZkcdcError


class TopicCreationError(ZkcdcError):
    """Kafka refused a topic for good, or kept refusing it past the deadline."""

    def __init__(self, message: str, code: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.code = code  # Kafka's error code; None when no answer came
        self.transient = transient  # no answer, or a refusal that passes: a later try may do


def _passing_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({
        KafkaError.NOT_CONTROLLER, KafkaError.REQUEST_TIMED_OUT, KafkaError._DESTROY_BROKER,
        KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN,
    })  # fmt: skip


def passes(error: Any) -> bool:
    """Is this KafkaError one that a later try may not meet?"""
    return bool(error.retriable()) or error.code() in _passing_codes()


def create_topics(
    new_admin: Callable[[], Any],
    topics: Sequence[Any],
    timeout_s: float,
    *,
    exist_ok: bool = False,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Creates every `NewTopic` of `topics` with clients `new_admin` builds. A topic that
    exists already is an error unless `exist_ok`, or an earlier try of ours may have made it
    (its answer lost on the way back)."""
    from confluent_kafka import KafkaError, KafkaException

    deadline = now() + timeout_s
    pending = {topic.topic: topic for topic in topics}
    tried: set[str] = set()
    backoff = Backoff(first_s=0.5, most_s=2.0)
    # not a wait: a retry of what Kafka refused for now, each try with a client of its own
    while pending:
        admin = new_admin()  # kept alive until its answers are in
        # The answer waits (up to 30 s) until the topic is made on its brokers, not only asked.
        futures = admin.create_topics(
            list(pending.values()), operation_timeout=min(30.0, max(1.0, deadline - now()))
        )
        for name, future in futures.items():
            try:
                future.result(max(1.0, deadline - now()))
            except NoAnswer as exc:
                raise TopicCreationError(
                    f"cannot create topic {name}: no answer within {timeout_s:.0f}s",
                    transient=True,
                ) from exc
            except KafkaException as exc:
                error = exc.args[0]
                exists = error.code() == KafkaError.TOPIC_ALREADY_EXISTS
                if exists and (exist_ok or name in tried):
                    del pending[name]
                elif exists or not passes(error) or now() > deadline:
                    raise TopicCreationError(
                        f"cannot create topic {name}: {error.str()}",
                        error.code(),
                        transient=not exists and passes(error),
                    ) from exc
            else:
                del pending[name]
            tried.add(name)
        if pending:
            sleep(backoff.failed())


def ensure_topic(
    new_admin: Callable[[], Any],
    read_metadata: Callable[[], Any],
    topic: str,
    partitions: int,
    timeout_s: float,
    config: Mapping[str, str] | None = None,
    *,
    now: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Creates `topic` unless it exists, with replication min(3, brokers up). A broker that goes
    down between the count and the creation (Kafka: "replication factor larger than available
    brokers") has the brokers counted again, until the deadline: a job started during an
    incident, a broker just stopping, still gets its topics."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    deadline = now() + timeout_s
    backoff = Backoff(first_s=0.5, most_s=2.0)
    # not a wait: a retry while brokers come and go (the replication factor counted again)
    while True:
        metadata = read_metadata()
        found = metadata.topics.get(topic)
        if found is not None and not found.error:
            return
        replication = min(3, len(metadata.brokers))
        new = NewTopic(topic, partitions, replication, config=dict(config or {}))
        try:
            create_topics(
                new_admin, [new], max(1.0, deadline - now()), exist_ok=True, now=now, sleep=sleep
            )
            return
        except TopicCreationError as exc:
            if exc.code != KafkaError.INVALID_REPLICATION_FACTOR:
                raise
            if now() > deadline:
                exc.transient = True  # brokers still coming and going: later may do
                raise
        sleep(backoff.failed())
