"""A legacy consumer group's owners beside what the range rebalance would give them, for the
page: `expected` ("topic/partition" -> thread) added to a group's state view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkcdc.streaming.rules.range_assignment import assign, thread_ids


def expected_owners(group: dict[str, Any], partitions_of: Callable[[str], int]) -> dict[str, str]:
    """Each subscribed topic's partitions spread over its threads by the range rebalance."""
    by_topic: dict[str, dict[str, int]] = {}
    for consumer, subscription in (group.get("members") or {}).items():
        for topic, count in (subscription or {}).items():
            by_topic.setdefault(topic, {})[consumer] = int(count)
    out: dict[str, str] = {}
    for topic, consumers in sorted(by_topic.items()):
        owned = assign(range(partitions_of(topic)), thread_ids(consumers))
        for thread, partitions in owned.items():
            for p in partitions:
                out[f"{topic}/{p}"] = thread
    return out


def with_expected(group: dict[str, Any], partitions_of: Callable[[str], int]) -> dict[str, Any]:
    return {**group, "expected": expected_owners(group, partitions_of)}
