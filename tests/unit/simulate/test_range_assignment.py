"""The legacy consumer's range rebalance, on the seed documents' own examples."""

from __future__ import annotations

from zkcdc.streaming.rules.range_assignment import assign, by_consumer, thread_ids


def test_two_consumers_split_four_partitions_in_halves():
    owned = assign([3, 1, 0, 2], thread_ids({"C0": 1, "C1": 1}))
    assert owned == {"C0-0": (0, 1), "C1-0": (2, 3)}


def test_three_single_thread_consumers_give_the_first_the_extra_partition():
    owned = assign(range(4), thread_ids({"node1": 1, "node2": 1, "node3": 1}))
    assert by_consumer(owned) == {"node1": (0, 1), "node2": (2,), "node3": (3,)}


def test_with_two_threads_each_the_third_consumer_is_idle():
    owned = assign(range(4), thread_ids({"node1": 2, "node2": 2, "node3": 2}))
    assert by_consumer(owned) == {"node1": (0, 1), "node2": (2, 3), "node3": ()}


def test_threads_sort_as_strings_and_every_partition_is_owned_once():
    threads = thread_ids({"g_host-b": 3, "g_host-a": 12})
    assert threads[:3] == ["g_host-a-0", "g_host-a-1", "g_host-a-10"]
    owned = assign(range(50), threads)
    flat = [p for parts in owned.values() for p in parts]
    assert sorted(flat) == list(range(50))
    sizes = sorted(len(parts) for parts in owned.values())
    assert sizes[-1] - sizes[0] <= 1


def test_no_threads_own_nothing():
    assert assign(range(3), []) == {}
