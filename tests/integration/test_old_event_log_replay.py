"""`zkcdc replay --alerts-out` (Spark) over the event log kept from before the schema had versions
(tests/fixtures/event_log_v1): today's zkcdc and a later one, whose schema has grown, make of it
the alerts and state that the zkcdc which wrote it made. The later one runs the stateful stage
as three shards on three tasks (`--shards 3`), which must change nothing of what comes out, and
its first Python worker on the driver starts slower than Spark waits for one (10 s), as on a
loaded machine: the query starts again from its checkpoint, and that too changes nothing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from schema_versions import FIXTURES, golden, later_schema_dir

pytestmark = pytest.mark.integration


def texts(values: list[dict[str, Any]], *leave_out: str) -> list[str]:
    return sorted(
        json.dumps({k: v for k, v in value.items() if k not in leave_out}, sort_keys=True)
        for value in values
    )


def slow_first_driver_worker(folder: Path) -> Path:
    """A Python for Spark's workers whose first transformWithStateInPandas driver worker (the
    one Spark starts without its daemon, and waits 10 s for) connects back after 12 s."""
    python = folder / "python"
    python.write_text(
        "#!/bin/sh\n"
        'case "$*" in *transform_with_state_driver_worker*)\n'
        f'  if mkdir "{folder / "slowed"}" 2>/dev/null; then sleep 12; fi;;\n'
        "esac\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return python


@pytest.mark.parametrize(("zkcdc", "shards"), [("today", "0"), ("later", "3")])
def test_replaying_the_kept_log_through_the_rules_gives_the_alerts_it_gave_then(
    zkcdc: str, shards: str, tmp_path: Path
) -> None:
    env = dict(os.environ)
    if zkcdc == "later":
        env["ZKCDC_SCHEMA_DIR"] = str(later_schema_dir(tmp_path)[0])
        env["PYSPARK_PYTHON"] = str(slow_first_driver_worker(tmp_path))
    alerts, state = tmp_path / "alerts.jsonl", tmp_path / "state.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "zkcdc", "replay", str(FIXTURES / "event_log_v1"),
         "--alerts-out", str(alerts), "--state-out", str(state), "--shards", shards],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    restarted = "streaming query restarted from its checkpoint" in done.stderr
    assert restarted == (zkcdc == "later"), done.stderr[-3000:]
    made = [json.loads(line) for line in alerts.read_text().splitlines()]
    assert texts(made) == texts(golden("alerts"))
    order = [(a["alert_id"], a["status"]) for a in made]  # the shards' merged by place
    for alert_id, status in order:
        if status == "RESOLVED" and (alert_id, "FIRING") in order:
            assert order.index((alert_id, "FIRING")) < order.index((alert_id, "RESOLVED"))
    views = [json.loads(line) for line in state.read_text().splitlines()]
    assert texts(views, "updated_ms") == texts(golden("state"), "updated_ms")
