"""What the alert query does with a micro-batch's rows on the driver (streaming/job/batch_delivery):
alerts to the sinks in event-time order, state upserts to the state topic, the ledger marked,
and the time the sinks took noted for the micro-batch's line and `zkcdc_alerts_sinks_seconds`.
Spark's rows stand in as a list; the sinks are a JSON-lines file and a state topic that keeps
what it is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zkcdc.streaming.job.batch_delivery import BatchDelivery
from zkcdc.streaming.job.job_metrics import JobMetrics
from zkcdc.streaming.sinks.alert_sinks import AlertSinks, SinkOptions
from zkcdc.streaming.sinks.ledger import BatchLedger
from zkcdc.streaming.state.state_topic import StateTopicSink

COLUMNS = ("kind", "key", "json", "status", "at_ms")


class Rows:
    """A micro-batch as foreachBatch hands it over (lean_batches.LeanBatch), its rows given."""

    def __init__(self, rows: list[tuple[Any, ...]], on_collect: Any = None) -> None:
        self._rows = rows
        self._on_collect = on_collect
        self.columns = COLUMNS
        self.ran_through = False

    def rows(self) -> list[tuple[Any, ...]]:
        if self._on_collect is not None:
            self._on_collect()
        return list(self._rows)

    def run_through(self) -> None:
        self.ran_through = True


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class StateTopic(StateTopicSink):
    """The state topic, as what it was given; each delivery takes a quarter of a second."""

    def __init__(self, clock: Clock) -> None:  # no Kafka
        self.clock = clock
        self.given: list[tuple[str, str | None]] = []

    def deliver(self, upserts: list[tuple[str, str | None]]) -> None:
        self.clock.now += 0.25
        self.given += upserts


def alert(alert_id: str, at_ms: int) -> tuple[Any, ...]:
    text = json.dumps({"alert_id": alert_id, "status": "FIRING", "at_ms": at_ms})
    return ("alert", alert_id, text, "FIRING", at_ms)


@pytest.fixture
def delivery(tmp_path: Path) -> tuple[BatchDelivery, StateTopic, Clock]:
    clock = Clock()
    state = StateTopic(clock)
    sinks = AlertSinks(SinkOptions(alerts_out=tmp_path / "alerts.jsonl"))
    ledger = BatchLedger(tmp_path / "sink-ledger")
    made = BatchDelivery(sinks, ledger, JobMetrics(), state, spark_writes_files=False,
                         scratch=tmp_path / "out", clock=clock)  # fmt: skip
    return made, state, clock


def test_a_batch_reaches_every_sink_and_the_time_its_sinks_took_is_noted(
    delivery: tuple[BatchDelivery, StateTopic, Clock], tmp_path: Path
) -> None:
    deliver, state, clock = delivery

    def stage_runs() -> None:  # collecting runs the micro-batch's stage: not the sinks' time
        clock.now += 3.0

    rows = [alert("b", 20), ("state", "c/broker/1", '{"up":true}', None, None), alert("a", 10),
            ("state", "c/broker/2", None, None, None)]  # fmt: skip
    deliver(Rows(rows, stage_runs), 7)  # type: ignore[arg-type]
    lines = (tmp_path / "alerts.jsonl").read_text().splitlines()
    assert [json.loads(line)["alert_id"] for line in lines] == ["a", "b"]  # event-time order
    assert state.given == [("c/broker/1", '{"up":true}'), ("c/broker/2", None)]
    assert deliver.ledger.last() == 7
    metrics = deliver.metrics
    assert metrics.registry.get_sample_value("zkcdc_alerts_sinks_seconds_count") == 1
    assert metrics.registry.get_sample_value("zkcdc_alerts_sinks_seconds_sum") == 0.25
    assert metrics.sinks_ms(7) == 250
    assert metrics.sinks_ms(7) is None  # said once


def test_a_batch_the_ledger_names_runs_for_its_state_alone(
    delivery: tuple[BatchDelivery, StateTopic, Clock], tmp_path: Path
) -> None:
    deliver, state, _ = delivery
    deliver.ledger.mark(3)
    batch = Rows([alert("a", 10)])
    deliver(batch, 3)  # type: ignore[arg-type]
    out = tmp_path / "alerts.jsonl"
    assert batch.ran_through and not (out.exists() and out.read_text())
    assert state.given == []
    assert deliver.metrics.sinks_ms(3) is None


def test_the_sinks_times_of_batches_never_said_are_let_go() -> None:
    metrics = JobMetrics()
    for batch in range(1000):
        metrics.sinks_took(batch, 0.01)
    assert metrics.sinks_ms(0) is None
    assert metrics.sinks_ms(999) == 10


def test_rows_made_before_the_query_are_delivered_once_under_a_ledger_of_their_own(
    delivery: tuple[BatchDelivery, StateTopic, Clock], tmp_path: Path
) -> None:
    """A backlog taken whole before the query starts (initial_state.py): its rows go to the
    sinks once, a delivery cut short by a kill resumes without sending an alert twice, and
    the job's own ledger is left for the query's micro-batches."""
    deliver, state, _ = delivery
    taken = BatchLedger(tmp_path / "initial-state" / "sink-ledger")
    (tmp_path / "initial-state").mkdir()
    rows = [alert("a", 10), ("state", "c/broker/1", '{"up":true}', None, None)]
    given = state.deliver

    def killed(upserts: list[tuple[str, str | None]]) -> None:  # the alerts are out by then
        raise KeyboardInterrupt

    state.deliver = killed  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        deliver.deliver_once(rows, taken)
    assert taken.last() == -1 and taken.pending() is not None
    state.deliver = given  # type: ignore[method-assign]
    deliver.deliver_once(rows, taken)  # the next start
    deliver.deliver_once(rows, taken)  # and the one after: delivered already
    deliver(Rows([alert("b", 20)]), 0)  # type: ignore[arg-type]  # the query's first batch
    lines = (tmp_path / "alerts.jsonl").read_text().splitlines()
    assert [json.loads(line)["alert_id"] for line in lines] == ["a", "b"]
    assert state.given == [("c/broker/1", '{"up":true}')]
    assert (taken.last(), deliver.ledger.last()) == (0, 0)
