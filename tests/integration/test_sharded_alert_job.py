"""`zkcdc stream alerts --shards N` (the stateful stage spread over Spark tasks) gives what the
single stage gives: the kept log's alerts, each FIRING before its RESOLVED."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from alerts_harness import state_store_writes
from schema_versions import FIXTURES, golden

pytestmark = pytest.mark.integration


def kept_log_job(tmp_path: Path, shards: int) -> subprocess.CompletedProcess[str]:
    """The alert job over the kept log, on the test's checkpoint, alerts to alerts.jsonl."""
    return subprocess.run(
        [sys.executable, "-m", "zkcdc", "stream", "alerts", "--event-log",
         str(FIXTURES / "event_log_v1"), "--available-now", "--shards", str(shards),
         "--checkpoint", str(tmp_path / "checkpoint"),
         "--alerts-out", str(tmp_path / "alerts.jsonl")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_the_kept_log_through_three_shards_gives_the_alerts_it_gave_then(tmp_path: Path) -> None:
    alerts = tmp_path / "alerts.jsonl"
    done = kept_log_job(tmp_path, 3)
    assert done.returncode == 0, done.stderr[-3000:]
    made = [json.loads(line) for line in alerts.read_text().splitlines()]
    as_text = sorted(json.dumps(a, sort_keys=True) for a in made)
    assert as_text == sorted(json.dumps(a, sort_keys=True) for a in golden("alerts"))
    order = [(a["alert_id"], a["status"]) for a in made]
    for alert_id, status in order:
        if status == "RESOLVED" and (alert_id, "FIRING") in order:
            assert order.index((alert_id, "FIRING")) < order.index((alert_id, "RESOLVED"))

    # The stateful stage ran as three tasks, each holding shards of the cluster: every task's
    # state store wrote changes (a task with no group writes empty changelogs).
    written = state_store_writes(tmp_path / "checkpoint")
    assert sorted(written) == ["0", "1", "2"] and all(written.values()), written
    # The checkpoint keeps its layout: another one is refused in one line, before Spark starts.
    again = kept_log_job(tmp_path, 0)
    assert again.returncode != 0
    assert again.stderr.strip().count("\n") == 0, again.stderr
    assert "--shards 3" in again.stderr and "zkcdc replay" in again.stderr
