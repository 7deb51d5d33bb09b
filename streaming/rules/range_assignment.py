"""The legacy (pre-0.9, ZooKeeper-based) consumer's range rebalance, as a pure function.

From the seed documents: sort the topic's partitions by id, sort the group's consumer threads
by `consumer.id-threadN` (as strings), then hand out contiguous ranges in that order. The seeds
state the range size as M = ceil(P / C), but their own worked example (4 partitions, 3
consumers of one thread each -> [0, 1], [2], [3]) and Kafka's RangeAssignor spread the
remainder over the first threads instead: each thread gets floor(P / C) partitions and the
first P mod C threads one more. That is what Kafka wrote into `/consumers/G/owners`, so that
is what this computes; threads beyond the partitions stay idle (an empty range)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def thread_ids(consumers: Mapping[str, int]) -> list[str]:
    """`consumer.id-N` for each consumer's N threads, in the order the rebalance sorts them."""
    return sorted(f"{consumer}-{n}" for consumer, count in consumers.items() for n in range(count))


def assign(partitions: Iterable[int], threads: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """Thread id -> the partitions it owns (possibly none)."""
    ordered_partitions = sorted(partitions)
    ordered_threads = sorted(threads)
    if not ordered_threads:
        return {}
    per_thread, extra = divmod(len(ordered_partitions), len(ordered_threads))
    owned: dict[str, tuple[int, ...]] = {}
    for i, thread in enumerate(ordered_threads):
        start = per_thread * i + min(i, extra)
        count = per_thread + (1 if i < extra else 0)
        owned[thread] = tuple(ordered_partitions[start : start + count])
    return owned


def by_consumer(owned: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Thread ownership folded to consumers (`consumer.id-N` -> `consumer.id`)."""
    out: dict[str, list[int]] = {}
    for thread, partitions in owned.items():
        out.setdefault(thread.rsplit("-", 1)[0], []).extend(partitions)
    return {consumer: tuple(sorted(parts)) for consumer, parts in out.items()}
