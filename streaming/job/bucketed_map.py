"""A dict kept in buckets of a key-value store (a shard's MapState in the alert job): a bucket is
read when a key of it is first used and written back, if it changed, at `flush`.

A store round trip costs ~150 µs (ARCHITECTURE.md), so entries are not stored one by one: a
micro-batch pays for the buckets its records touch, and a bucket holds a few hundred entries at
a million partitions. Values may be changed in place (a topic's set of partitions): a bucket is
compared by its encoded bytes, so nothing changed is never written. How a bucket is written is
the caller's (`encode`, `decode`: the job's saved-state records).

Which bucket a partition's entry is in is part of a checkpoint's layout (`BucketLayout`,
recorded by checkpoint_layout.py): a checkpoint is read the way it was written."""

from __future__ import annotations

import enum
import functools
import zlib
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

Load = Callable[[int], bytes | None]
Store = Callable[[int, bytes | None], None]  # None: the bucket is empty now, remove it
Decode = Callable[[bytes], dict[Any, Any]]
Encode = Callable[[Any], bytes]


class BucketLayout(enum.Enum):
    """How a (topic, partition) key finds its bucket; other keys (a topic) go by their own hash
    in both."""

    # Each partition by its own hash. Any batch of more than a few thousand partitions touches
    # nearly every bucket: a catch-up past a large cluster's snapshot rewrote the whole state
    # each micro-batch. Checkpoints written before PARTITION_RUNS keep it.
    KEY_HASH = "key-hash"
    # A topic's partitions in runs of PARTITION_RUN, a run's in one bucket: capture reads a
    # snapshot topic by topic, and a topic's assignment names all its partitions, so such a
    # batch touches a few buckets a topic. Single changes land as spread as before.
    PARTITION_RUNS = "partition-runs"


PARTITION_RUN = 256


@dataclass(frozen=True)
class Buckets:
    """How a shard's maps are bucketed: the layout, and the number of buckets each map has."""

    layout: BucketLayout
    count: int


# What a checkpoint that names no bucket count holds (every release before NEW_BUCKETS).
EARLIER_BUCKET_COUNT = 1024
# A new checkpoint's. At 1,000,000 partitions a shard holds ~3,900 runs; with 1,024 buckets each
# held ~4 runs, so a snapshot's batch decoded and wrote ~4 entries for each it changed (the
# cluster shard, which keeps every partition, ~15 s a batch of 100,000 states); with 4,096 a
# run has about a bucket of its own (~5 s). A live change opens one bucket, now ~4x smaller.
NEW_BUCKETS = Buckets(BucketLayout.PARTITION_RUNS, 4096)


def bucket_of(
    key: Any, buckets: int, spread: int = 1, layout: BucketLayout = BucketLayout.KEY_HASH
) -> int:
    """A key's bucket, stable across processes. `spread`: the number of shards the same hash
    already chose between, so that the buckets of one shard are all used (KEY_HASH; a run's
    hash is not the one that chose the shard)."""
    return numbering(buckets, spread, layout)(key)


def numbering(buckets: int, spread: int, layout: BucketLayout) -> Callable[[Any], int]:
    """`bucket_of` with the layout chosen once: a snapshot's batch asks for millions of keys'
    buckets."""
    if layout is BucketLayout.PARTITION_RUNS:
        return lambda key: _run_bucket(key, buckets)
    return lambda key: _key_bucket(key, buckets, spread)


# Cached apart, the layout not in the key: an enum member hashes in Python, once a lookup.
@functools.lru_cache(maxsize=1 << 17)  # the same partitions come back batch after batch
def _key_bucket(key: Any, buckets: int, spread: int) -> int:
    text = "/".join(str(part) for part in key) if isinstance(key, tuple) else str(key)
    return (zlib.crc32(text.encode()) // spread) % buckets


def _run_bucket(key: Any, buckets: int) -> int:
    if type(key) is not tuple:
        return _key_bucket(key, buckets, 1)
    topic, partition = key
    return _run_number(topic, partition // PARTITION_RUN, buckets)


# Cached by run, not by key: a million partitions are a few thousand runs, and a cache of
# keys that size evicts each key before it comes back (a snapshot touches each a few times).
@functools.lru_cache(maxsize=1 << 15)
def _run_number(topic: str, run: int, buckets: int) -> int:
    return zlib.crc32(f"{topic}/{run}".encode()) % buckets


class BucketedMap(MutableMapping[Any, Any]):
    def __init__(
        self,
        load: Load,
        buckets: int,
        decode: Decode,
        encode: Encode,
        spread: int = 1,
        layout: BucketLayout = BucketLayout.KEY_HASH,
    ) -> None:
        self._load = load
        self._decode, self._encode = decode, encode
        self._number = numbering(buckets, spread, layout)
        self._open: dict[int, dict[Any, Any]] = {}
        self._as_read: dict[int, bytes | None] = {}

    def _bucket(self, key: Any) -> dict[Any, Any]:
        number = self._number(key)
        bucket = self._open.get(number)
        if bucket is None:
            blob = self._load(number)
            bucket = {} if blob is None else self._decode(blob)
            self._open[number] = bucket
            self._as_read[number] = blob
        return bucket

    def __getitem__(self, key: Any) -> Any:
        return self._bucket(key)[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._bucket(key)[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._bucket(key)[key]

    def __contains__(self, key: object) -> bool:
        return key in self._bucket(key)

    # Mapping's own get and setdefault go through a KeyError for every key not there yet: a
    # snapshot's partitions are all new.
    def get(self, key: Any, default: Any = None) -> Any:
        return self._bucket(key).get(key, default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        return self._bucket(key).setdefault(key, default)

    def __iter__(self) -> Iterator[Any]:
        # The rules look entries up; walking every bucket would read the whole store.
        raise TypeError("a BucketedMap is not iterated: it would read every bucket")

    def __len__(self) -> int:
        raise TypeError("a BucketedMap has no cheap length")

    def opened(self) -> int:
        return len(self._open)

    def flush(self, store: Store) -> int:
        """Writes back every bucket that changed; returns how many. The map is empty after."""
        written = 0
        for number, bucket in self._open.items():
            blob = self._encode(bucket) if bucket else None
            if blob != self._as_read[number]:
                store(number, blob)
                written += 1
        self._open.clear()
        self._as_read.clear()
        return written
