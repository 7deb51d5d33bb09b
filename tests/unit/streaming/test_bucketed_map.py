"""A dict in buckets of a store: read where used, written back only where changed."""

from __future__ import annotations

import ast
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcdc.streaming.job.bucketed_map import (
    EARLIER_BUCKET_COUNT,
    NEW_BUCKETS,
    PARTITION_RUN,
    BucketedMap,
    BucketLayout,
    bucket_of,
)
from zkcdc.streaming.rules.engine_scope import hash_space, partition_shard


class Store:
    def __init__(self) -> None:
        self.blobs: dict[int, bytes] = {}
        self.reads: list[int] = []
        self.writes: list[int] = []

    def load(self, number: int) -> bytes | None:
        self.reads.append(number)
        return self.blobs.get(number)

    def store(self, number: int, blob: bytes | None) -> None:
        self.writes.append(number)
        if blob is None:
            self.blobs.pop(number, None)
        else:
            self.blobs[number] = blob


def _map(
    store: Store, buckets: int, layout: BucketLayout = BucketLayout.KEY_HASH, spread: int = 1
) -> BucketedMap:
    """Buckets written as Python literals here: the container is under test, not the job's
    own bucket records (streaming/job/saved_state.py)."""
    return BucketedMap(store.load, buckets, lambda b: ast.literal_eval(b.decode()),
                       lambda d: repr(d).encode(), spread, layout)  # fmt: skip


keys = st.tuples(st.sampled_from("abc"), st.integers(0, 40))
operations = st.lists(
    st.tuples(st.sampled_from(["set", "del", "add", "get"]), keys, st.integers(0, 9)), max_size=60
)


@given(
    st.lists(operations, min_size=1, max_size=5),
    st.sampled_from([1, 4, 64]),
    st.sampled_from(BucketLayout),
)
def test_it_holds_what_a_dict_holds_across_flushes(
    batches: list[Any], buckets: int, layout: BucketLayout
) -> None:
    store, expected = Store(), {}
    for batch in batches:
        live = _map(store, buckets, layout)
        for op, key, value in batch:
            if op == "set":
                live[key] = expected[key] = value
            elif op == "del" and key in expected:
                del live[key]
                del expected[key]
            elif op == "add":  # changed in place, as a topic's set of partitions is
                live.setdefault(key[0], set()).add(value)
                expected.setdefault(key[0], set()).add(value)
            elif op == "get":
                assert live.get(key, -1) == expected.get(key, -1)
        live.flush(store.store)
    check = _map(store, buckets, layout)
    assert all(check[k] == v for k, v in expected.items())
    assert all(k not in check for k in [("a", 41), "z"])


def test_a_batch_reads_and_writes_only_the_buckets_it_touches() -> None:
    store = Store()
    first = _map(store, 1024)
    for p in range(1000):
        first[("t", p)] = p
    first.flush(store.store)
    store.reads.clear()
    store.writes.clear()
    second = _map(store, 1024)
    assert second[("t", 7)] == 7  # read: one bucket, nothing written back
    second[("t", 8)] = -8
    assert second.flush(store.store) == 1
    assert store.writes == [bucket_of(("t", 8), 1024)]
    assert len(store.reads) == 2


def test_the_buckets_of_each_shard_are_all_used() -> None:
    shards, buckets = 4, 16
    for shard in range(1, shards + 1):
        mine = [("t", p) for p in range(4000) if partition_shard("t", p, shards) == shard]
        used = {bucket_of(k, buckets, spread=hash_space(shards)) for k in mine}
        assert used == set(range(buckets)), shard


def _one_shards_snapshot(topics: int) -> list[tuple[str, int]]:
    """What capture's snapshot gives of shard 1 of 2: topic after topic, each with its 1,000
    partitions."""
    return [
        (f"topic-{t}", p)
        for t in range(topics)
        for p in range(1000)
        if partition_shard(f"topic-{t}", p, 2) == 1
    ]


@pytest.mark.parametrize(("layout", "at_most"), [(BucketLayout.PARTITION_RUNS, 8 * 4),
                                                 (BucketLayout.KEY_HASH, 1024)])  # fmt: skip
def test_a_snapshot_batch_opens_a_few_buckets_a_topic_in_partition_runs(
    layout: BucketLayout, at_most: int
) -> None:
    """8 topics' partitions, ~4,000 in one shard: a catch-up micro-batch. By each partition's
    hash nearly every bucket is read and written back; in runs, those of 4 runs a topic."""
    store = Store()
    live = _map(store, 1024, layout, spread=hash_space(2))
    for key in _one_shards_snapshot(8):
        live[key] = 0
    assert live.opened() <= at_most
    if layout is BucketLayout.KEY_HASH:
        assert live.opened() > 900


def test_runs_of_a_million_partitions_fill_every_bucket_evenly() -> None:
    """1,000 topics of 1,000 partitions: every bucket holds some, none more than a few runs."""
    runs = Counter(
        bucket_of((f"topic-{t}", run * PARTITION_RUN), 1024, layout=BucketLayout.PARTITION_RUNS)
        for t in range(1000)
        for run in range(-(-1000 // PARTITION_RUN))
    )
    assert len(runs) >= 1000
    assert max(runs.values()) <= 14


def test_a_new_checkpoints_buckets_hold_about_a_run_each_at_a_million_partitions() -> None:
    """The same 4,000 runs in NEW_BUCKETS: a bucket read for one run decodes few others'. The
    mean is over buckets that hold any (what a batch opening one pays); with 1,024 it is ~4."""

    def runs_a_bucket(count: int) -> float:
        runs = Counter(
            bucket_of((f"topic-{t}", run * PARTITION_RUN), count, layout=NEW_BUCKETS.layout)
            for t in range(1000)
            for run in range(-(-1000 // PARTITION_RUN))
        )
        return sum(runs.values()) / len(runs)

    assert runs_a_bucket(NEW_BUCKETS.count) < 1.7
    assert runs_a_bucket(EARLIER_BUCKET_COUNT) > 3.5


def test_a_partitions_run_shares_one_bucket_and_other_keys_go_by_their_hash() -> None:
    runs = BucketLayout.PARTITION_RUNS
    first = {bucket_of(("t", p), 1024, layout=runs) for p in range(PARTITION_RUN)}
    assert len(first) == 1
    assert bucket_of(("t", PARTITION_RUN), 1024, layout=runs) != first.pop()
    assert bucket_of("t", 1024, layout=runs) == bucket_of("t", 1024)  # a topic's entry
