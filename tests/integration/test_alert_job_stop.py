"""A supervisor's SIGTERM to `zkcdc stream alerts`: in either layout, in the middle of a backlog
or idle, the job exits 0 within 30 s, quietly (no Java stack trace in its output)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from alerts_harness import committed, job_read_to
from conftest import wait_until
from simulate_harness import build_cluster

pytestmark = pytest.mark.integration

STOP_S = 30
# A line of a Java stack trace ("\tat org.apache...(File.java:12)") or a Java exception's name.
JAVA_TRACE = re.compile(r"^\s+at [\w$.<>/]+\(|\bjava\.lang\.\w+(Error|Exception)\b")


@pytest.mark.parametrize("moment", ["mid-backlog", "idle"])
@pytest.mark.parametrize("layout", [[], ["--shards", "2"]], ids=["one-group", "shards-2"])
def test_a_sigterm_stops_the_job_within_30_s_with_exit_0_and_no_java_trace(
    cluster, zk_chroot, start_capture, changes_topic, start_alert_job, layout, moment
):
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    build_cluster(connect)
    daemon = start_capture(connect, "--cluster", "stop", publish_to=changes_topic)
    daemon.wait_logged("in sync")
    changes_topic.wait_for(lambda r: r["op"] == "READ", "the snapshot")
    backlog = ["--max-records-per-batch", "1"] if moment == "mid-backlog" else []
    job, _ = start_alert_job(changes_topic, *layout, *backlog)
    checkpoint = Path(job.option("--checkpoint"))
    job.wait_started()
    if moment == "idle":
        assert daemon.stop() == 0
        ends = changes_topic.ends()
        wait_until(lambda: job_read_to(checkpoint, changes_topic.topic, ends), 300,
                   what="the job to read the topic to its end")  # fmt: skip
    else:
        # One record a micro-batch from each of six partitions: the snapshot's records keep the
        # job busy well past its first commits.
        wait_until(lambda: len(committed(checkpoint)) >= 3, 300, what="three micro-batches")
        ends = changes_topic.ends()
        assert not job_read_to(checkpoint, changes_topic.topic, ends), "no backlog left"
    job.process.send_signal(signal.SIGTERM)
    try:
        code = job.process.wait(STOP_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {STOP_S} s after SIGTERM:\n{job.tail()}") from None
    output = job.log_file.read_text(errors="replace")
    traces = [line for line in output.splitlines() if JAVA_TRACE.search(line)]
    assert code == 0, job.tail()
    assert not traces, "\n".join(traces[:20])
