"""`zkcdc stream history` with its driver killed with -9 mid-run, then restarted: the job ends
in one line, and the lake's `changes` holds every seq of the log once. A module of its own, so
that it runs beside the other lake tests (theirs share one Spark session on one worker); its
check asks the lake through `zkcdc history sql`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until
from driver_harness import JobProcesses, the_one_error_line
from history_harness import fixture_records, topic_of_the_kept_log, zkcdc

pytestmark = pytest.mark.integration

BATCH = 100  # records a micro-batch: the kept log's 400 in four


def test_a_driver_killed_mid_run_ends_the_job_in_one_line_and_the_restart_loses_and_doubles_nothing(
    shared_cluster: Any, tmp_path: Path
) -> None:
    """The driver JVM, which writes the lake, killed with SIGKILL mid-run (as the kernel's OOM
    killer kills it): the job exits 1 with one line and no traceback, no process of it is
    left, and the job started again leaves every seq of the log in `changes` once."""
    topic = topic_of_the_kept_log(shared_cluster.bootstrap_servers, "kill", tmp_path)
    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    command = [sys.executable, "-m", "zkcdc", "stream", "history", "--lake", str(lake),
               "--bootstrap-servers", shared_cluster.bootstrap_servers, "--topic", topic,
               "--checkpoint", str(checkpoint), "--max-records-per-batch", str(BATCH),
               "--alerts-topic", f"{topic}.alerts"]  # fmt: skip
    commits = lake / "changes" / "_delta_log"
    killed_log = tmp_path / "killed.log"
    with killed_log.open("wb") as log:
        job = subprocess.Popen([*command, "--available-now"], stdout=log, stderr=log,
                               start_new_session=True)  # fmt: skip
        try:
            # The table's creation and two micro-batches committed: the job is mid-run.
            wait_until(lambda: len(list(commits.glob("*.json"))) >= 3 or job.poll() is not None,
                       timeout_s=300, what="two micro-batches in the lake")  # fmt: skip
            assert job.poll() is None, killed_log.read_text()[-3000:]
            family = JobProcesses(job.pid)
            family.driver().kill()
            code = job.wait(30)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
    said = killed_log.read_text(errors="replace")
    assert code == 1, said[-3000:]
    error = the_one_error_line(said)
    assert "the history job" in error, said[-3000:]
    assert error.endswith("it resumes from its checkpoint"), error
    assert not (left := family.left_running()), left
    done_before = len(list(commits.glob("*.json")))
    assert done_before < 1 + len(fixture_records()) // BATCH, "the job was not cut short"
    again = subprocess.run([*command, "--available-now"], capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    asked = zkcdc("history", "sql", "SELECT seq FROM changes", "--lake", str(lake), "--json")
    assert asked.returncode == 0, asked.stderr[-3000:]
    seqs = [json.loads(line)["seq"] for line in asked.stdout.splitlines()]
    assert sorted(seqs) == [r["seq"] for r in fixture_records()], (
        said[-2000:] + "\n--- restarted ---\n" + again.stderr[-4000:]
    )
