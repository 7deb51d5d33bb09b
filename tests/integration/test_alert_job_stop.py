"""A supervisor's SIGTERM to `zkcdc stream alerts` in the middle of a backlog, in either layout:
the job exits 0 within 30 s, quietly (no Java stack trace in its output). An idle job's stop is
held to the same in the alert tests that end with one (`AlertJob.stop_quietly`: one group in
test_alert_job.py's stopped follower, two shards in its killed-and-restarted job). A job whose
Spark driver is killed under it exits 1 at once, in one line."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from alerts_harness import committed, job_read_to
from conftest import wait_until
from driver_harness import JobProcesses, the_one_error_line
from simulate_harness import build_cluster
from ui_harness import free_port

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("layout", "group"),
    [(["--shards", "0"], False), (["--shards", "2"], True)],
    ids=["one-group", "shards-2-to-its-process-group"],
)
def test_a_sigterm_mid_backlog_stops_the_job_within_30_s_with_exit_0_and_no_java_trace(
    cluster, zk_chroot, start_capture, changes_topic, start_alert_job, layout, group
):
    """`group`: the signal goes to the job's whole process group. The Spark driver's JVM is
    in a session of its own (driver_jvm.py): the job stops it once the micro-batch under way
    is done, rather than the JVM ending with the signal under the job (which then exited 1,
    "the Spark driver's JVM exited with status 143")."""
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
    job.stop_quietly(group=group)


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


def test_a_driver_killed_under_the_job_ends_it_in_one_line_and_leaves_nothing_running(
    cluster, zk_chroot, start_capture, changes_topic, start_alert_job
):
    """The driver JVM killed under a live job, as the kernel's OOM killer kills it: the job
    exits non-zero within 30 s with one line that says so and how to go on, no traceback, and
    no process of it left. The driver runs with ExitOnOutOfMemoryError, so a heap run out ends
    it the same way (streaming/job/driver_jvm.py) instead of leaving a job that waits on it
    forever."""
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    build_cluster(connect)
    daemon = start_capture(connect, "--cluster", "jvm", publish_to=changes_topic)
    daemon.wait_logged("in sync")
    changes_topic.wait_for(lambda r: r["op"] == "READ", "the snapshot")
    job, _ = start_alert_job(changes_topic)
    job.wait_started()
    family = JobProcesses(job.process.pid)
    driver = family.driver()
    assert "-XX:+ExitOnOutOfMemoryError" in driver.cmdline()
    driver.kill()
    try:
        code = job.process.wait(30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"running 30 s after its driver was killed:\n{job.tail()}") from None
    log = job.log_file.read_text(errors="replace")
    assert code == 1, log[-3000:]
    said = the_one_error_line(log)
    assert said.endswith(
        "zkcdc: error: the Spark driver's JVM was killed (SIGKILL, as the kernel does when the "
        "machine runs out of memory) under the alert job; start the alert job again: it resumes "
        "from its checkpoint"
    ), said
    assert not (left := family.left_running()), left
