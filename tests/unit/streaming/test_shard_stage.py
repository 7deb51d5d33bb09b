"""The sharded layout's stateful step (shard_stage.py) given shards as stored entries: the
single engine, split after the first micro-batches (engine_split.py) and written as each
shard's MapState entries (`stored_entries`), goes on in the job's step as the single engine
does, alert for alert in its order. The step runs as Spark calls it, its MapState a dict."""

from __future__ import annotations

from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.job.alert_job import drain_ordered
from zkcdc.streaming.job.bucketed_map import NEW_BUCKETS
from zkcdc.streaming.job.shard_stage import MemoryMapState, _processor_class, stored_entries
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.engine_split import split
from zkcdc.streaming.rules.seq_order import SeqOrder

from .test_engine_split import (
    SOURCE_PARTITIONS,
    _batches,
    _shard_waiting,
    _source_partition,
    _waiting,
)
from .test_sharded_engine import QUICK, record_streams


class _Handle:
    def __init__(self) -> None:
        self.state = MemoryMapState()

    def getMapState(self, *_: Any) -> MemoryMapState:
        return self.state


def _rows(batch: list[dict[str, Any]], shard: int, n: int) -> Any:
    routed = [(r["seq"], _source_partition(r), *_shard_waiting(r, shard, n)) for r in batch]
    return pd.DataFrame(routed, columns=["seq", "partition", "ts_ms", "op", "path", "events"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_streams(), st.integers(1, 3), st.data())
def test_shards_stored_from_a_split_go_on_in_the_job_as_the_single_engine(
    records: list[dict[str, Any]], n: int, data: st.DataObject
) -> None:
    batches = _batches(records)
    cut = data.draw(st.integers(0, len(batches)), label="cut")
    single, order = AlertEngine("c", QUICK), SeqOrder(SOURCE_PARTITIONS)
    for batch in batches[:cut]:
        for r in batch:
            order.add(r["seq"], _source_partition(r), _waiting(r), single.last_seq)
        drain_ordered(single, order)
    steps = []
    for engine, shard_order in split(single, order, n):
        step = _processor_class()(QUICK, SOURCE_PARTITIONS, True, n, NEW_BUCKETS)
        step.init(_Handle())
        for kind, number, blob in stored_entries(engine, shard_order, n, NEW_BUCKETS):
            step.store.updateValue((kind, number), (blob,))
        steps.append(step)
    assert_steps_go_on_as_the_single_engine(steps, single, order, batches[cut:], n)


def assert_steps_go_on_as_the_single_engine(
    steps: list[Any], single: AlertEngine, order: SeqOrder, batches: list[Any], n: int
) -> None:
    """The shards' steps over the next micro-batches, as Spark calls them, give the single
    engine's alerts over the same batches, merged by place."""
    expected, placed = [], []
    for batch in batches:
        for r in batch:
            order.add(r["seq"], _source_partition(r), _waiting(r), single.last_seq)
        expected += [alert.as_text() for _, alert in drain_ordered(single, order)]
        for shard, step in enumerate(steps):
            for out in step.handleInputRows(("c", shard), iter([_rows(batch, shard, n)]), None):
                alerts = out[out["kind"] == "alert"]
                placed += list(zip(alerts["place"], alerts["json"], strict=True))
    assert [text for _, text in sorted(placed)] == expected


def test_only_a_shards_engine_is_stored_as_entries() -> None:
    with pytest.raises(StreamingError, match="only a shard's engine"):
        stored_entries(AlertEngine("c", QUICK), SeqOrder(), 2, NEW_BUCKETS)
