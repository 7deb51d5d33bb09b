"""A supervisor's SIGTERM to `zkcdc stream alerts` in the middle of a backlog, in either layout:
the job exits 0 within 30 s, quietly (no Java stack trace in its output). An idle job's stop is
held to the same in the alert tests that end with one (`AlertJob.stop_quietly`: one group in
test_alert_job.py's stopped follower, two shards in its killed-and-restarted job)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alerts_harness import committed, job_read_to
from conftest import wait_until
from simulate_harness import build_cluster

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "layout", [["--shards", "0"], ["--shards", "2"]], ids=["one-group", "shards-2"]
)
def test_a_sigterm_mid_backlog_stops_the_job_within_30_s_with_exit_0_and_no_java_trace(
    cluster, zk_chroot, start_capture, changes_topic, start_alert_job, layout
):
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    build_cluster(connect)
    daemon = start_capture(connect, "--cluster", "stop", publish_to=changes_topic)
    daemon.wait_logged("in sync")
    changes_topic.wait_for(lambda r: r["op"] == "READ", "the snapshot")
    # One record a micro-batch from each of six partitions: the snapshot's records keep the job
    # busy well past its first commits.
    job, _ = start_alert_job(changes_topic, *layout, "--max-records-per-batch", "1")
    checkpoint = Path(job.option("--checkpoint"))
    job.wait_started()
    wait_until(lambda: len(committed(checkpoint)) >= 3, 300, what="three micro-batches")
    assert not job_read_to(checkpoint, changes_topic.topic, changes_topic.ends()), "no backlog"
    job.stop_quietly()
