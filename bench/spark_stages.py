"""The stateful stage of each micro-batch, read from Spark's event log: how long it ran and in
how many tasks. B9 measures the stage itself with it (its records/s), beside the whole micro-batch, whose reading of Kafka, decoding and routing run in
the stage before it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The scope Spark gives the state store's RDD of each stateful operator the job may run
# (transformWithStateInPandas is TransformWithStateInPySpark from Spark 4.1).
STATEFUL_SCOPES = (
    "TransformWithStateInPandas",
    "TransformWithStateInPySpark",
    "FlatMapGroupsInPandasWithState",
)


@dataclass(frozen=True)
class StatefulStage:
    batch_id: int
    stage_id: int
    tasks: int
    wall_ms: int  # submission to completion
    task_ms: int  # the tasks' run time, added up


def event_log_conf(directory: Path) -> dict[str, str]:
    """A session's settings that write its event log, one plain file, into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": directory.resolve().as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


def stateful_stages(directory: Path) -> list[StatefulStage]:
    """The stateful stages of the one application whose event log is in `directory`, by
    micro-batch; a micro-batch that ran none (nothing read) has none."""
    logs = [p for p in directory.iterdir() if p.is_file() and not p.name.endswith(".inprogress")]
    if len(logs) != 1:
        raise ValueError(f"{directory}: {len(logs)} finished event logs, not one")
    batch_of: dict[int, int] = {}  # stage -> micro-batch
    task_ms: dict[int, int] = {}
    completed: list[dict[str, Any]] = []
    with logs[0].open() as lines:
        for line in lines:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                batch = (event.get("Properties") or {}).get("streaming.sql.batchId")
                if batch is not None:
                    for stage in event["Stage IDs"]:
                        batch_of[stage] = int(batch)
            elif kind == "SparkListenerTaskEnd":
                run = (event.get("Task Metrics") or {}).get("Executor Run Time") or 0
                task_ms[event["Stage ID"]] = task_ms.get(event["Stage ID"], 0) + run
            elif kind == "SparkListenerStageCompleted":
                completed.append(event["Stage Info"])
    stages = []
    for info in completed:
        scopes = {json.loads(r["Scope"])["name"] for r in info["RDD Info"] if r.get("Scope")}
        sid = info["Stage ID"]
        if (
            scopes.intersection(STATEFUL_SCOPES)
            and sid in batch_of
            and "Failure Reason" not in info
        ):
            stages.append(
                StatefulStage(
                    batch_of[sid], sid, info["Number of Tasks"],
                    info["Completion Time"] - info["Submission Time"], task_ms.get(sid, 0),
                )
            )  # fmt: skip
    return sorted(stages, key=lambda s: (s.batch_id, s.stage_id))
