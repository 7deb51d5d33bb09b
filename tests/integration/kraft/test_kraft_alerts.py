"""The alert job, unchanged, on a KRaft cluster's change records: a follower stopped with
SIGTERM fires `broker_down` and `under_replicated` and its return resolves them, as on the
ZooKeeper stack (a fenced broker counts as down)."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest
from alerts_harness import AlertJob, AlertsTopic
from capture_harness import CaptureProcess, ChangesTopic
from confluent_kafka.admin import AdminClient, NewTopic

from zkcdc.ground.change_types import EventType
from zkcdc.ground.child_processes import stop
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack

pytestmark = pytest.mark.integration


def test_a_stopped_follower_fires_broker_down_and_under_replicated_then_resolves_them(
    kraft_stack: LocalStack, tmp_path: Path
) -> None:
    info = kraft_stack.info()
    suffix = uuid.uuid4().hex[:6]
    topic = f"orders-{suffix}"
    admin = AdminClient({"bootstrap.servers": info.bootstrap_servers})
    create_topics(lambda: admin, [NewTopic(topic, 2, 3)], 60)
    changes = ChangesTopic(info.bootstrap_servers, f"zkcdc.changes.kraft-alerts-{suffix}")
    alerts = AlertsTopic(info.bootstrap_servers, f"zkcdc.alerts.kraft-{suffix}")
    capture = CaptureProcess(
        ["--source", "kraft", "--metadata-log-dir", str(info.metadata_log_dirs[0]),
         "--bootstrap-controllers", info.bootstrap_controllers,
         "--bootstrap-servers", info.bootstrap_servers, "--topic", changes.topic,
         "--cluster", "kraft", "--state-dir", str(tmp_path / "state")],
        tmp_path / "capture.log",
    )  # fmt: skip
    job = AlertJob(
        ["--bootstrap-servers", info.bootstrap_servers, "--topic", changes.topic,
         "--alerts-topic", alerts.topic, "--state-topic", f"zkcdc.state.kraft-{suffix}",
         "--checkpoint", str(tmp_path / "checkpoint"), "--warm-up-batches", "0"],
        tmp_path / "alerts.log",
    )  # fmt: skip
    try:
        capture.wait_logged("in sync")
        state = changes.wait_event(EventType.PARTITION_STATE_CREATED, topic=topic, partition=0)
        job.wait_started()  # the 180 s below are the incident's, not Spark's start under load
        follower = next(b for b in state["isr"] if b != state["leader"])
        kraft_stack.stop_broker(follower, signal.SIGTERM)
        try:
            down = alerts.wait_for(
                lambda a: a["rule"] == "broker_down" and a["entity"] == f"broker/{follower}"
                and a["status"] == "FIRING", f"broker_down FIRING for {follower}", 180, job,
            )  # fmt: skip
            under = alerts.wait_for(
                lambda a: a["rule"] == "under_replicated" and a["entity"] == f"{topic}/0"
                and a["status"] == "FIRING", f"under_replicated FIRING for {topic}/0", 120, job,
            )  # fmt: skip
            assert str(follower) not in under["details"]["isr"].split(",")
        finally:
            kraft_stack.start_broker(follower)
        # A bound, not a speed check: once the job's Kafka source stalled ~3 min fetching
        # the topic's latest offsets while the broker came back (Spark's three tries of the
        # admin's 60 s listOffsets), then went on.
        for fired in (down, under):
            resolved = alerts.wait_for(
                lambda a, f=fired: a["alert_id"] == f["alert_id"] and a["status"] == "RESOLVED",
                f"{fired['rule']} RESOLVED", 360, job,
            )  # fmt: skip
            assert resolved["started_ms"] == fired["started_ms"]
            assert resolved["cluster"] == "kraft"
        assert job.stop() == 0, job.tail()
        assert capture.stop() == 0
    finally:
        for process in (job.process, capture.process):
            stop(process, 0, signal.SIGKILL)
        print(f"--- capture log ---\n{capture.tail(60)}\n--- alert job log ---\n{job.tail(60)}")
        changes.close()
        alerts.close()
