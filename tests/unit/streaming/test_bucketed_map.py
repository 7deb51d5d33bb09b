"""A dict in buckets of a store: read where used, written back only where changed."""

from __future__ import annotations

import ast
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zkcdc.streaming.job.bucketed_map import BucketedMap, bucket_of
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


def _map(store: Store, buckets: int) -> BucketedMap:
    """Buckets written as Python literals here: the container is under test, not the job's
    own bucket records (streaming/job/saved_state.py)."""
    return BucketedMap(store.load, buckets, lambda b: ast.literal_eval(b.decode()),
                       lambda d: repr(d).encode())  # fmt: skip


keys = st.tuples(st.sampled_from("abc"), st.integers(0, 40))
operations = st.lists(
    st.tuples(st.sampled_from(["set", "del", "add"]), keys, st.integers(0, 9)), max_size=60
)


@given(st.lists(operations, min_size=1, max_size=5), st.sampled_from([1, 4, 64]))
def test_it_holds_what_a_dict_holds_across_flushes(batches: list[Any], buckets: int) -> None:
    store, expected = Store(), {}
    for batch in batches:
        live = _map(store, buckets)
        for op, key, value in batch:
            if op == "set":
                live[key] = expected[key] = value
            elif op == "del" and key in expected:
                del live[key]
                del expected[key]
            elif op == "add":  # changed in place, as a topic's set of partitions is
                live.setdefault(key[0], set()).add(value)
                expected.setdefault(key[0], set()).add(value)
        live.flush(store.store)
    check = _map(store, buckets)
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
