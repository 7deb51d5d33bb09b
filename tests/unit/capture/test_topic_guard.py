"""The changes topic as capture keys its records for: a topic gone or re-partitioned is said in
one line naming the topic and what changed; a restart into a resized topic is refused unless
the operator accepts it; Kafka not answering is no change."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from zkcdc.capture.delivery.topic_guard import TopicChangedError, TopicGuard, starting_count


class Client:
    def __init__(self, partitions: int | None) -> None:
        self.partitions = partitions
        self.asked = 0
        self.down = False

    def list_topics(self, topic: str, timeout: float) -> Any:
        self.asked += 1
        if self.down:
            raise RuntimeError("all brokers down")
        found = (
            {}
            if self.partitions is None
            else {
                topic: SimpleNamespace(error=None, partitions=dict.fromkeys(range(self.partitions)))
            }
        )
        return SimpleNamespace(topics=found)


def test_the_guard_asks_now_and_then_and_names_a_vanished_or_resized_topic() -> None:
    clock = [0.0]
    client = Client(6)
    guard = TopicGuard(client, "zkcdc.changes", 6, 1.0, lambda: clock[0], every_s=5.0)
    guard.check()
    assert client.asked == 0  # not due yet
    clock[0] = 5.0
    guard.check()
    assert client.asked == 1
    client.down = True
    guard.check(force=True)  # unreachable: not a topic change
    client.down, client.partitions = False, None
    with pytest.raises(TopicChangedError, match=r"changes topic zkcdc.changes is gone .*6 part"):
        guard.check(force=True)
    client.partitions = 1
    with pytest.raises(TopicChangedError, match=r"now has 1 partition\(s\), not the 6"):
        guard.check(force=True)


def test_a_restart_into_a_resized_topic_is_refused_unless_accepted(tmp_path: Path) -> None:
    assert starting_count(tmp_path, "t", 6, accept=False) == 6
    assert starting_count(tmp_path, "t", 6, accept=False) == 6
    with pytest.raises(TopicChangedError, match=r"has 1 partition.*keyed its records for 6"):
        starting_count(tmp_path, "t", 1, accept=False)
    assert starting_count(tmp_path, "t", 1, accept=True) == 1  # the operator's say-so
    assert starting_count(tmp_path, "t", 1, accept=False) == 1  # and from then on, 1
    assert starting_count(tmp_path, "other", 3, accept=False) == 3  # another topic: its own
