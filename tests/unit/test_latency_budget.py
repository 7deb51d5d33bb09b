"""The latency budget (bench/latency_budget.py) takes an alert's path apart from what each
step left behind; a record whose micro-batch Spark no longer keeps is left out, not guessed."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

budget = importlib.import_module("latency_budget")
MicroBatch = budget.MicroBatch

STATE = "/brokers/topics/t/partitions/{}/state"


def test_a_record_belongs_to_the_micro_batch_whose_end_first_passes_it():
    batches = [MicroBatch(5, 1_000, 1_400, {0: 10}), MicroBatch(6, 1_500, 1_900, {0: 20})]
    assert budget._taking(batches, 0, 15).batch_id == 6
    assert budget._taking(batches, 0, 25) is None  # not read yet
    # Batch 4 is gone: what batch 5 read may have been read by it.
    assert budget._taking(batches, 0, 5) is None
    assert budget._taking([MicroBatch(0, 0, 1, {0: 10})], 0, 3).batch_id == 0


def test_an_incident_s_parts_add_up_to_its_total_and_the_phases_are_of_its_batch():
    mtime = 10_000
    traces = budget.Traces(
        fired={"t/1": [(mtime + 2, 10_900)]},
        produced={("t/1", mtime + 2): 10_880},
        versions={("t/1", mtime): 7},
        changes={(STATE.format(1), 7): (mtime, 10_005, 10_030, 0, 41)},
        state_path=STATE,
        phases={3: {"addBatch": 500, "triggerExecution": 700}},
    )
    batches = [MicroBatch(2, 9_000, 9_500, {0: 40}), MicroBatch(3, 10_200, 10_950, {0: 42})]
    summary = traces.of([("t/1", mtime), ("t/2", mtime)], batches)
    (trace,) = summary["traces"]
    parts = [trace[p] for p in budget.PARTS]
    assert parts == [5, 25, 170, 680, 20] and sum(parts) == trace["total"] == 900
    assert (summary["traced"], summary["incidents"]) == (1, 2)
    assert summary["phases_p50"] == {"addBatch": 500, "triggerExecution": 700}
    assert summary["batch_ms"] == {"p50": 750, "p99": 750}
