"""A supervisor's SIGTERM to `zkcdc stream alerts` in the middle of a backlog, in either layout:
the job exits 0 within 30 s, quietly (no Java stack trace in its output). An idle job's stop is
held to the same in the alert tests that end with one (`AlertJob.stop_quietly`: one group in
test_alert_job.py's stopped follower, two shards in its killed-and-restarted job)."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from alerts_harness import committed, job_read_to
from conftest import wait_until
from simulate_harness import build_cluster
from ui_harness import free_port

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


def test_a_sigterm_while_warming_up_stops_the_job_within_30_s_and_leaves_no_warm_up_behind(
    cluster, zk_chroot, start_capture, changes_topic, start_alert_job
):
    """The warm-up (streaming/job/warm_up.py) is stopped as the job's own query is, and its
    checkpoint goes; the job's own query, not yet started, has read nothing. Meanwhile
    /healthz says it is warming up, not ready."""
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    build_cluster(connect)
    daemon = start_capture(connect, "--cluster", "warm", publish_to=changes_topic)
    daemon.wait_logged("in sync")
    changes_topic.wait_for(lambda r: r["op"] == "READ", "the snapshot")
    port = free_port()
    job, _ = start_alert_job(
        changes_topic, "--warm-up-batches", "1000", "--metrics-port", str(port)
    )
    checkpoint = Path(job.option("--checkpoint"))
    warm_commits = checkpoint / "warm-up" / "commits"

    def two_warm_up_batches() -> bool | None:
        done = (
            [p for p in warm_commits.iterdir() if p.name.isdigit()] if warm_commits.is_dir() else []
        )
        return True if len(done) >= 2 else None

    job.wait_until(two_warm_up_batches, "two warm-up micro-batches", 300, interval_s=0.2)
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10)
    assert (answer.value.code, answer.value.read()) == (503, b"warming up\n")
    job.stop_quietly()
    assert not (checkpoint / "warm-up").exists(), "the warm-up's checkpoint left behind"
    assert committed(checkpoint) == [], "the job's own query ran"
    assert "warmed up" in job.log_file.read_text()
