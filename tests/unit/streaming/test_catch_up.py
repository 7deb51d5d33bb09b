"""How far behind its topic's end the alert job is, from Spark's progress reports, and the
catch-up said once when it begins and once when it ends (streaming/job/catch_up.py). The real
case, a job started on a backlog: tests/integration/test_alert_job.py."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from manual_clock import ManualClock

from zkcdc.streaming.job.alert_runner import BatchReports
from zkcdc.streaming.job.catch_up import (
    CATCH_UP_RECORDS,
    CAUGHT_UP_RECORDS,
    EARLIEST,
    LATEST,
    CatchUp,
    CatchUpBegun,
    CaughtUp,
    behind_from_progress,
    behind_from_watermarks,
    starting_offsets,
)
from zkcdc.streaming.job.job_metrics import JobMetrics


def kafka_source(end: dict[str, int], latest: dict[str, int], as_text: bool = False) -> Any:
    """A Kafka source's part of a progress report, as Spark writes it."""
    source = {
        "description": "KafkaV2[Subscribe[zkcdc.changes]]",
        "endOffset": {"zkcdc.changes": end},
        "latestOffset": {"zkcdc.changes": latest},
    }
    if as_text:
        source = {k: v if k == "description" else json.dumps(v) for k, v in source.items()}
    return source


def test_behind_from_progress_sums_each_partitions_distance_to_its_newest_offset() -> None:
    progress = {"sources": [kafka_source({"0": 10, "1": 200}, {"0": 110, "1": 205})]}
    assert behind_from_progress(progress) == 105
    text = {"sources": [kafka_source({"0": 10}, {"0": 30}, as_text=True)]}
    assert behind_from_progress(text) == 20


def test_a_partition_the_micro_batch_did_not_read_yet_counts_from_its_start() -> None:
    # One new to the topic (not in the batch's end offsets), and one read past what Spark
    # last saw of its newest.
    progress = {"sources": [kafka_source({"0": 50}, {"0": 40, "1": 7})]}
    assert behind_from_progress(progress) == 7


@pytest.mark.parametrize(
    "sources",
    [
        [],
        [{"description": "FileStreamSource[file:/log]", "endOffset": {"logOffset": 3},
          "latestOffset": None}],
        [{"endOffset": "not json", "latestOffset": "{}"}],
        [{"endOffset": {"t": [1, 2]}, "latestOffset": {"t": {"0": 5}}}],
    ],
)  # fmt: skip
def test_a_source_that_names_no_kafka_offsets_says_nothing(sources: list[Any]) -> None:
    assert behind_from_progress({"sources": sources}) is None
    assert behind_from_progress({}) is None


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12))  # fmt: skip
def test_no_report_shape_makes_it_fail(value: Any) -> None:
    """Spark writes what it writes: whatever a source holds, a number or None comes back."""
    for progress in ({"sources": [{"endOffset": value, "latestOffset": value}]},
                     {"sources": [{"endOffset": {"t": {"0": 1}}, "latestOffset": value}]}):  # fmt: skip
        found = behind_from_progress(progress)
        assert found is None or found >= 0


def test_the_backlog_at_a_start_runs_from_each_partitions_start_to_its_end() -> None:
    marks = {0: (10, 50), 1: (0, 7), 2: (5, 5)}  # (low, high) watermarks by partition
    assert behind_from_watermarks({0: EARLIEST, 1: EARLIEST, 2: EARLIEST}, marks) == 47
    assert behind_from_watermarks({0: LATEST, 1: LATEST, 2: LATEST}, marks) == 0
    # an offset below the low watermark (records deleted by retention) counts from the low;
    # one past the end (a topic recreated smaller) counts nothing; a partition not named is
    # read from its start, as Spark reads one new to the topic
    assert behind_from_watermarks({0: 3, 1: 9}, marks) == 40 + 0 + 0


def test_a_new_querys_starts_come_from_its_starting_offsets_option() -> None:
    assert starting_offsets("earliest", "t", [0, 1]) == {0: EARLIEST, 1: EARLIEST}
    assert starting_offsets("latest", "t", [0]) == {0: LATEST}
    named = json.dumps({"t": {"0": 42, "1": -1}})
    assert starting_offsets(named, "t", [0, 1, 2]) == {0: 42, 1: LATEST, 2: EARLIEST}
    # what Spark refuses when the query starts (in its own words) counts as not known here
    assert starting_offsets("[1, 2]", "t", [0]) == {}
    assert starting_offsets(json.dumps({"other": {"0": 1}}), "t", [0]) == {}


@given(st.text(max_size=40) | st.builds(json.dumps, st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["t", "0", "1", "x"]), inner, max_size=3), max_leaves=8)),
    st.dictionaries(st.integers(0, 3), st.tuples(st.integers(0, 100), st.integers(0, 100)),
                    max_size=4))  # fmt: skip
def test_no_starting_offsets_option_makes_the_backlog_fail(option: str, marks: Any) -> None:
    """A user's --starting-offsets is any text: the backlog is a count or the option is left
    to Spark, never an exception at the start."""
    marks = {p: (min(a, b), max(a, b)) for p, (a, b) in marks.items()}
    assert behind_from_watermarks(starting_offsets(option, "t", list(marks)), marks) >= 0


def test_a_catch_up_is_said_when_it_begins_and_when_it_ends_with_what_it_read() -> None:
    clock = ManualClock(1000.0)
    catch_up = CatchUp(clock)
    assert catch_up.behind(CATCH_UP_RECORDS - 1, 5) is None  # a busy job, not a catch-up
    assert catch_up.behind(None) is None
    assert catch_up.behind(2_000_000) == CatchUpBegun(2_000_000)
    assert catch_up.catching_up
    assert catch_up.eta_s(2_000_000) is None  # no pace yet
    clock.now += 30
    assert catch_up.eta_s(1_000_000) == 30.0  # half the gap closed in 30 s
    assert catch_up.behind(1_000_000, 1_000_000) is None
    assert catch_up.behind(None, 0) is None  # not known: nothing said, nothing ends
    clock.now += 30
    assert catch_up.behind(CAUGHT_UP_RECORDS, 990_000) is None  # still a backlog
    ended = catch_up.behind(CAUGHT_UP_RECORDS - 1, 10_500)
    assert ended == CaughtUp(2_000_500, 60.0)
    assert ended.records_per_s == 33_342
    assert not catch_up.catching_up
    assert catch_up.eta_s(5_000) is None
    assert catch_up.behind(50_000, 50_000) is None  # live: below the start, nothing said
    assert catch_up.behind(CATCH_UP_RECORDS, 1) == CatchUpBegun(CATCH_UP_RECORDS)  # again


class JavaProgress:
    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report

    def json(self) -> str:
        return json.dumps(self.report)


class Query:
    """A query's Java side, as far as its progress goes."""

    def __init__(self) -> None:
        self.reports: list[JavaProgress] = []
        self._jsq = self

    def lastProgress(self) -> JavaProgress | None:  # Spark's name
        return self.reports[-1] if self.reports else None

    def recentProgress(self) -> list[JavaProgress]:  # Spark's name
        return self.reports[-100:]

    def ran(self, batch: int, records: int, behind: int) -> None:
        self.reports.append(JavaProgress({
            "batchId": batch, "numInputRows": records, "durationMs": {"triggerExecution": 900},
            "sources": [kafka_source({"0": 0}, {"0": behind})],
        }))  # fmt: skip


def test_the_job_logs_how_far_behind_each_micro_batch_leaves_it_and_its_catch_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, metrics, query = ManualClock(1000.0), JobMetrics(), Query()
    reports = BatchReports(metrics, CatchUp(clock))
    caplog.set_level(logging.INFO, logger="zkcdc.stream")
    metrics.started(True)
    reports.behind(300_000)  # at the start, from Kafka's watermarks
    assert metrics.health() == (True, "running, catching up: 300,000 records behind")
    query.ran(0, 100_000, 200_000)
    query.ran(1, 100_000, 100_000)
    reported = reports.since(query, -1)
    assert reported == 1
    assert metrics.registry.get_sample_value("zkcdc_alerts_records_behind") == 100_000
    assert metrics.health() == (True, "running, catching up: 100,000 records behind")
    clock.now += 12.5
    query.ran(2, 100_000, 0)
    assert reports.since(query, reported) == 2
    assert metrics.registry.get_sample_value("zkcdc_alerts_records_behind") == 0
    assert metrics.health() == (True, "running")
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(":")[0] for line in lines if not line.startswith("micro-batch")] == [
        "catching up",
        "caught up",
    ]
    behind = [(fields(r)["records_behind"], fields(r).get("catch_up_eta_s"))
              for r in caplog.records if r.getMessage() == "micro-batch"]  # fmt: skip
    caught = next(fields(r) for r in caplog.records if r.getMessage().startswith("caught up"))
    # No time had passed for the first two: no pace to tell the time left by.
    assert behind == [(200_000, None), (100_000, None), (0, 0.0)]
    assert (caught["records"], caught["seconds"]) == (300_000, 12.5)


def test_the_micro_batch_line_says_what_its_sinks_took(caplog: pytest.LogCaptureFixture) -> None:
    metrics, query = JobMetrics(), Query()
    reports = BatchReports(metrics)
    caplog.set_level(logging.INFO, logger="zkcdc.stream")
    metrics.sinks_took(0, 0.0421)
    query.ran(0, 500, 0)
    query.ran(1, 500, 0)  # delivered to files by Spark itself: no sinks' time
    reports.since(query, -1)
    said = [fields(r) for r in caplog.records if r.getMessage() == "micro-batch"]
    assert [line.get("sinks_ms") for line in said] == [42, None]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """An event's fields, as zkcdc's log lines carry them (zkcdc.ground.logs)."""
    return record.zkcdc_fields  # type: ignore[attr-defined,no-any-return]
