"""B9 reads the stateful stage of each micro-batch from Spark's event log: its tasks and its
time, apart from the stage before it that reads, decodes and routes."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
spark_stages = importlib.import_module("spark_stages")


def job(job_id: int, batch: int, stages: list[int]) -> dict:
    return {"Event": "SparkListenerJobStart", "Job ID": job_id, "Stage IDs": stages,
            "Properties": {"streaming.sql.batchId": str(batch)}}  # fmt: skip


def task(stage: int, run_ms: int) -> dict:
    return {"Event": "SparkListenerTaskEnd", "Stage ID": stage,
            "Task Metrics": {"Executor Run Time": run_ms}}  # fmt: skip


def stage(stage_id: int, scope: str, tasks: int, start: int, end: int, **more: str) -> dict:
    rdds = [{"Name": "StateStoreRDD", "Scope": json.dumps({"id": "7", "name": scope})},
            {"Name": "ShuffledRowRDD", "Scope": json.dumps({"id": "3", "name": "Exchange"})},
            {"Name": "SQLExecutionRDD"}]  # fmt: skip
    info = {"Stage ID": stage_id, "Number of Tasks": tasks, "RDD Info": rdds,
            "Submission Time": start, "Completion Time": end, **more}  # fmt: skip
    return {"Event": "SparkListenerStageCompleted", "Stage Info": info}


def write_log(directory: Path, events: list[dict]) -> Path:
    directory.mkdir()
    (directory / "local-1795959536282").write_text("".join(json.dumps(e) + "\n" for e in events))
    return directory


def test_each_micro_batch_gives_its_stateful_stage_time_and_tasks_and_nothing_else(tmp_path):
    events = [
        {"Event": "SparkListenerApplicationStart"},
        job(0, 0, [0, 1]),
        task(0, 300), task(0, 280), task(0, 310),
        stage(0, "MicroBatchScan", 3, 1_000, 1_400),  # the read, decode and route
        task(1, 900), task(1, 850),
        stage(1, "TransformWithStateInPandas", 2, 1_400, 2_350),
        job(1, 1, [2, 3]),
        stage(2, "MicroBatchScan", 3, 3_000, 3_300),
        task(3, 400), task(3, 420),
        stage(3, "FlatMapGroupsInPandasWithState", 2, 3_300, 3_750),
        job(2, 2, [4]),  # failed: not a measure of the stage
        stage(4, "TransformWithStateInPandas", 2, 4_000, 4_100, **{"Failure Reason": "lost"}),
        stage(9, "TransformWithStateInPandas", 2, 5_000, 5_100),  # of no micro-batch
    ]  # fmt: skip
    got = spark_stages.stateful_stages(write_log(tmp_path / "events", events))
    assert got == [
        spark_stages.StatefulStage(batch_id=0, stage_id=1, tasks=2, wall_ms=950, task_ms=1750),
        spark_stages.StatefulStage(batch_id=1, stage_id=3, tasks=2, wall_ms=450, task_ms=820),
    ]


def test_a_log_still_being_written_or_two_applications_is_an_error_not_a_guess(tmp_path):
    directory = write_log(tmp_path / "events", [job(0, 0, [1])])
    (directory / "local-2.inprogress").write_text("")
    assert spark_stages.stateful_stages(directory) == []  # the finished one alone
    (directory / "local-3").write_text("")
    with pytest.raises(ValueError, match="2 finished event logs, not one"):
        spark_stages.stateful_stages(directory)


def test_the_settings_write_one_plain_file_into_the_directory(tmp_path):
    conf = spark_stages.event_log_conf(tmp_path / "log")
    assert (tmp_path / "log").is_dir()
    assert conf["spark.eventLog.dir"] == (tmp_path / "log").as_uri()
    assert conf["spark.eventLog.compress"] == conf["spark.eventLog.rolling.enabled"] == "false"
