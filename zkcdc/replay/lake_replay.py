"""`zkcdc replay PATH --lake URI`: a log into the lake's tables, as `zkcdc stream history`
keeps them live: its change records into `changes` by the same job over the log as bounded
input, and the alerts the rules raise over it (the alert job of `replay --alerts-out`, in the
same Spark session) into `alerts`. A second backfill of the same log adds nothing
(streaming/lake/table_writer.py)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from zkcdc.capture.delivery.event_log import Damage
from zkcdc.replay.alerts_replay import readable_log, rules_over
from zkcdc.streaming.job.change_source import LogInput
from zkcdc.streaming.lake.history_job import (
    HistoryJobOptions,
    lake_session,
    run_history,
    write_alerts,
)
from zkcdc.streaming.lake.lake_tables import check_local_lake
from zkcdc.streaming.rules.rule_settings import RuleSettings


def replay_into_lake(
    log: Path,
    lake: str,
    master: str = "local[2]",
    on_damage: Callable[[Damage], None] = lambda d: None,
    rules: Mapping[str, str] | None = None,
) -> list[Damage]:
    """The log's records and alerts into the lake; returns the damage found (the valid part
    was used)."""
    settings = RuleSettings().with_overrides(rules or {})  # a bad one: before Spark starts
    check_local_lake(lake)  # before minutes of rules
    work = Path(tempfile.mkdtemp(prefix="zkcdc-replay-lake-"))
    try:
        source = readable_log(log, work, on_damage)
        alerts = work / "alerts.jsonl"
        spark = lake_session(master)
        try:
            rules_over(source.path, alerts, work / "alerts-checkpoint", settings, master,
                       partition_shards=source.layout, spark=spark)  # fmt: skip
            options = HistoryJobOptions(
                source=LogInput(source.path),
                lake=lake,
                checkpoint=work / "checkpoint",
                master=master,
                available_now=True,
            )
            run_history(options, threading.Event(), spark)
            write_alerts(spark, lake, alerts)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return source.damaged
