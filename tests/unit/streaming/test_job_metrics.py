"""The alert job's metrics: batches and alerts counted, the last batch's time kept (counted from
the start until the first batch, so "stalled" cannot fire on a job still starting)."""

from __future__ import annotations

from prometheus_client import generate_latest

from zkcdc.streaming.job.job_metrics import JobMetrics


def _text(metrics: JobMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def test_batches_alerts_and_the_last_batch_time_are_exported() -> None:
    clock = [100.0]
    metrics = JobMetrics(now=lambda: clock[0])
    assert metrics.health() == (False, "starting (Spark)")
    metrics.started(True)
    assert "zkcdc_alerts_last_batch_timestamp_seconds 100.0" in _text(metrics)
    assert metrics.health() == (True, "running")
    clock[0] = 130.0
    metrics.delivered(["FIRING", "FIRING", "RESOLVED"])
    text = _text(metrics)
    assert "zkcdc_alerts_batches_total 1.0" in text
    assert 'zkcdc_alerts_delivered_total{status="FIRING"} 2.0' in text
    assert 'zkcdc_alerts_delivered_total{status="RESOLVED"} 1.0' in text
    assert "zkcdc_alerts_last_batch_timestamp_seconds 130.0" in text
    assert "zkcdc_alerts_running 1.0" in text
    metrics.started(False)
    assert "zkcdc_alerts_running 0.0" in _text(metrics)
    assert metrics.health()[0] is False


def test_health_says_warming_up_while_the_warm_up_runs_and_running_once_the_query_is() -> None:
    metrics = JobMetrics(now=lambda: 0.0)
    metrics.warming_up(True)
    assert metrics.health() == (False, "warming up")
    metrics.warming_up(False)
    assert metrics.health() == (False, "starting (Spark)")
    metrics.started(True)
    assert metrics.health() == (True, "running")
