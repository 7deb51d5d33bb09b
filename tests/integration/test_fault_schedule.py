"""The quick fault schedule (bench/b6_fault_schedule.py --quick): capture and the alert job
through network faults (Toxiproxy between each pair: latency with jitter, a bandwidth cap,
connections reset, a black hole past capture's session) and process kills, then the checker:
nothing unaccounted, duplicated or missing on the changes topic, each expected alert FIRING
and RESOLVED once on the alerts topic and in the file, both equal to a replay of the records,
no daemon exiting by itself. The seed is fixed here (ZKCDC_TEST_FAULT_SEED overrides it): the same
seed gives the same schedule, printed first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench" / "b6_fault_schedule.py"


def test_the_quick_fault_schedule_leaves_every_count_at_its_goal(tmp_path):
    seed = os.environ.get("ZKCDC_TEST_FAULT_SEED", "1")
    run = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--no-save", "--seed", seed,
         "--keep", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    said = run.stderr[-4000:] + run.stdout[-2000:]
    assert f"seed {seed}:" in run.stderr, said
    assert run.returncode == 0, said
    assert "| 0 | 0 | 0 | 0 | 0 |" in run.stdout, said
