"""The job logs each micro-batch once from Spark's own progress reports, read as Spark's JSON a
report at a time (alert_runner.progress_since), not PySpark's field-by-field conversion of all
of them at every poll."""

from __future__ import annotations

import json
from typing import Any

from zkcdc.streaming.job.alert_runner import progress_since


class JavaProgress:
    """What py4j hands over for a StreamingQueryProgress: its json()."""

    def __init__(self, batch: int) -> None:
        self.batch = batch

    def json(self) -> str:
        return json.dumps({"batchId": self.batch, "numInputRows": 1, "durationMs": {}})


class JavaQuery:
    """A streaming query's Java side as far as progress goes: Spark keeps the newest reports."""

    def __init__(self) -> None:
        self.reports: list[JavaProgress] = []

    def lastProgress(self) -> JavaProgress | None:
        return self.reports[-1] if self.reports else None

    def recentProgress(self) -> list[JavaProgress]:
        return self.reports[-100:]


class Query:
    def __init__(self) -> None:
        self._jsq = JavaQuery()


def batches(query: Any, reported: int) -> list[int]:
    return [p["batchId"] for p in progress_since(query, reported)]


def test_each_micro_batch_is_reported_once_and_in_order_however_many_ran_between_polls() -> None:
    query = Query()
    assert batches(query, -1) == []
    query._jsq.reports.append(JavaProgress(0))
    assert batches(query, -1) == [0]
    assert batches(query, 0) == []
    query._jsq.reports += [JavaProgress(1), JavaProgress(2), JavaProgress(3)]
    assert batches(query, 0) == [1, 2, 3]
    query._jsq.reports += [JavaProgress(b) for b in range(4, 300)]
    assert batches(query, 3) == list(range(200, 300))  # what Spark still keeps
