"""The training run's made-up log (zkcdc.replay.class_archive_training) is a log the job reads
and its rules act on: alerts fire and resolve, so the training takes the job's alerting paths
and their classes into the archive, not an idle query's alone."""

from __future__ import annotations

import importlib
from pathlib import Path

from zkcdc.capture.delivery.event_log import log_files, read_records
from zkcdc.replay.class_archive_training import CLUSTER, write_training_log
from zkcdc.streaming.job.class_archive import TRAINING_COMMAND
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.rule_settings import RuleSettings


def test_the_training_log_fires_and_resolves_the_incidents_alerts(tmp_path: Path) -> None:
    write_training_log(tmp_path / "events")
    engine = AlertEngine(CLUSTER, RuleSettings())
    alerts = [
        (alert.rule, alert.status)
        for file in log_files(tmp_path / "events")
        for record in read_records(file)
        for alert in engine.process(record)
    ]
    for rule in ("broker_down", "offline_partition", "controller_failover", "under_replicated"):
        assert (rule, "FIRING") in alerts, alerts
    assert ("broker_down", "RESOLVED") in alerts and ("under_replicated", "RESOLVED") in alerts


def test_the_training_command_names_the_training_module() -> None:
    assert TRAINING_COMMAND[1:] == ("-m", "zkcdc.replay.class_archive_training")
    assert callable(importlib.import_module(TRAINING_COMMAND[2]).train)
