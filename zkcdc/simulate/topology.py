"""The shape of a simulated cluster and where its replicas go, as Kafka would place them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from zkcdc.simulate.errors import SimulateError

Assignment = dict[int, tuple[int, ...]]


@dataclass(frozen=True)
class ClusterShape:
    brokers: int = 6
    topics: int = 200
    partitions_per_topic: int = 50
    replication_factor: int = 3
    topic_prefix: str = "sim"
    first_broker_id: int = 1

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise SimulateError("--brokers must be at least 1")
        if self.topics < 0 or self.partitions_per_topic < 1:
            raise SimulateError("--topics must be >= 0 and --partitions-per-topic >= 1")
        if not 1 <= self.replication_factor <= self.brokers:
            raise SimulateError(
                f"--replication-factor {self.replication_factor} needs 1..{self.brokers} "
                f"(the number of brokers)"
            )

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(range(self.first_broker_id, self.first_broker_id + self.brokers))

    @property
    def topic_names(self) -> tuple[str, ...]:
        width = max(4, len(str(self.topics)))
        return tuple(f"{self.topic_prefix}-{i:0{width}d}" for i in range(self.topics))

    @property
    def partitions(self) -> int:
        return self.topics * self.partitions_per_topic


def assign_replicas(
    broker_ids: Sequence[int], partitions: int, replication_factor: int, rng: random.Random
) -> Assignment:
    """Kafka's rack-unaware placement (`AdminUtils.assignReplicasToBrokersRackUnaware`): the
    first replicas go round-robin from a random start, the followers at a shift that grows
    each time the round wraps, so leadership and followers spread evenly."""
    brokers = list(broker_ids)
    n = len(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: Assignment = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = tuple(replicas)
    return out
