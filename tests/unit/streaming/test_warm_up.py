"""The warm-up's rules that need no Spark: what it reads, and when its query has nothing more
to read. Its runs are tests/integration/test_replay.py (its alerts are dropped, the job's own
are the replay's) and test_alert_job_stop.py (a stop while warming up)."""

from __future__ import annotations

from pathlib import Path

from manual_clock import ManualClock

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.streaming.job.change_source import KafkaInput
from zkcdc.streaming.job.warm_up import (
    WAITING_FOR_DATA,
    WARM_UP_RECORDS,
    IdleWatch,
    warm_up_checkpoint,
    warm_up_source,
)

WAITING = {"message": WAITING_FOR_DATA, "isDataAvailable": False, "isTriggerActive": False}
READING = {"message": "Processing new data", "isDataAvailable": True, "isTriggerActive": True}
STARTING = {"message": "Initializing sources", "isDataAvailable": False, "isTriggerActive": False}


def test_a_query_is_idle_once_it_has_waited_for_records_for_the_whole_span() -> None:
    clock = ManualClock()
    watch = IdleWatch(1.5, clock)
    assert not watch.idle(WAITING)
    clock.now = 1.4
    assert not watch.idle(WAITING)
    clock.now = 1.5
    assert watch.idle(WAITING)


def test_records_between_two_waits_start_the_span_again() -> None:
    clock = ManualClock()
    watch = IdleWatch(1.5, clock)
    watch.idle(WAITING)
    clock.now = 1.0
    assert not watch.idle(READING)
    clock.now = 2.0
    assert not watch.idle(WAITING)
    clock.now = 3.4
    assert not watch.idle(WAITING)
    clock.now = 3.5
    assert watch.idle(WAITING)


def test_a_query_still_starting_is_not_idle_however_long_it_takes() -> None:
    clock = ManualClock()
    watch = IdleWatch(1.5, clock)
    for second in range(0, 120, 10):
        clock.now = float(second)
        assert not watch.idle(STARTING)
    assert not watch.idle({})


def test_the_warm_up_reads_the_jobs_topic_from_its_first_records_a_few_at_a_time() -> None:
    job = KafkaInput(
        KafkaConnection(bootstrap_servers="broker:9092"), topic="t", starting_offsets="latest",
        registry_url="http://registry", max_records_per_batch=100_000,
    )  # fmt: skip
    warm = warm_up_source(job)
    assert (warm.starting_offsets, warm.max_records_per_batch) == ("earliest", WARM_UP_RECORDS)
    assert (warm.kafka, warm.topic, warm.registry_url) == (job.kafka, "t", "http://registry")


def test_the_warm_ups_checkpoint_is_inside_the_jobs_beside_its_query() -> None:
    job = Path("/var/lib/zkcdc/job")
    assert warm_up_checkpoint(job).parent == job
    assert warm_up_checkpoint(job).name not in {"alerts", "sink-ledger", "batch-out"}
