"""Forensics on a copy of a KRaft node's metadata log: `events cat --from-metadata-log` prints
the incident's records, `replay --from-metadata-log --alerts-out` runs them through the alert
rules; a folder that is not a metadata log is one clear line and a non-zero exit."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import wait_until

from zkcdc.ground.change_types import EventType
from zkcdc.ground.topic_creation import create_topics
from zkcdc.stack import LocalStack

pytestmark = pytest.mark.integration


def _zkcdc(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkcdc", *args], capture_output=True, text=True, timeout=timeout
    )


# The holds set small (users' defaults: 5 s and 10 s), so the stop need last only HOLD_S.
RULES = ["--rule", "broker_down_for_ms=1000", "--rule", "under_replicated_for_ms=1000"]
HOLD_S = 2.5


def _partition(admin: AdminClient, topic: str) -> Any:
    """Partition 0 as the brokers describe it (None while they do not know it yet)."""
    found = admin.list_topics(topic, timeout=30).topics.get(topic)
    return None if found is None else found.partitions.get(0)


def _in_sync(admin: AdminClient, topic: str, replicas: int) -> Any:
    partition = _partition(admin, topic)
    full = partition is not None and partition.leader >= 0 and len(partition.isrs) == replicas
    return partition if full else None


def test_a_copy_of_the_metadata_log_shows_and_replays_a_stopped_follower(
    kraft_stack: LocalStack, tmp_path: Path
) -> None:
    info = kraft_stack.info()
    topic = f"forensics-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": info.bootstrap_servers})
    create_topics(lambda: admin, [NewTopic(topic, 1, 3)], 60)
    partition = wait_until(lambda: _in_sync(admin, topic, 3), what="a leader and a full ISR")
    follower = next(b for b in partition.replicas if b != partition.leader)
    kraft_stack.stop_broker(follower, signal.SIGTERM)
    wait_until(lambda: follower not in (_partition(admin, topic) or partition).isrs,
               what="the follower out")  # fmt: skip
    time.sleep(HOLD_S)  # fixed wait: longer than broker_down's and under_replicated's hold
    kraft_stack.start_broker(follower)
    wait_until(lambda: _in_sync(admin, topic, 3), 120, what="the follower back in the ISR")
    time.sleep(2)  # fixed wait: NoOps (every 500 ms) carry the log's time on past the return
    copy = tmp_path / "__cluster_metadata-0"
    shutil.copytree(info.metadata_log_dirs[0], copy)

    bare = _zkcdc("events", "cat", "--from-metadata-log", str(copy))
    assert bare.returncode != 0 and "--cluster NAME" in bare.stderr.strip().splitlines()[-1]
    shown = _zkcdc("events", "cat", "--from-metadata-log", str(copy), "--json", "--cluster", "k",
                   "--type", EventType.ISR_SHRUNK, "--type", EventType.ISR_EXPANDED)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    events = [e for line in shown.stdout.splitlines() for e in json.loads(line)["events"]
              if e.get("topic") == topic]  # fmt: skip
    kinds = [e["type"] for e in events]
    assert EventType.ISR_SHRUNK in kinds and EventType.ISR_EXPANDED in kinds, kinds
    assert kinds.index(EventType.ISR_SHRUNK) < kinds.index(EventType.ISR_EXPANDED)
    shrunk = events[kinds.index(EventType.ISR_SHRUNK)]
    assert shrunk["removed"] == [follower]

    alerts_file = tmp_path / "alerts.jsonl"
    replayed = _zkcdc("replay", "--from-metadata-log", str(copy), "--cluster", "k",
                      "--alerts-out", str(alerts_file), *RULES, timeout=600)  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    alerts = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    for rule, entity in (("under_replicated", f"{topic}/0"), ("broker_down", f"broker/{follower}")):
        statuses = [a["status"] for a in alerts if a["rule"] == rule and a["entity"] == entity]
        assert statuses[:1] == ["FIRING"] and "RESOLVED" in statuses, (rule, statuses)


def test_a_folder_that_is_not_a_metadata_log_is_one_clear_line(tmp_path: Path) -> None:
    for command in (("events", "cat"), ("replay",)):
        extra = ("--alerts-out", str(tmp_path / "a.jsonl")) if command == ("replay",) else ()
        done = _zkcdc(*command, "--from-metadata-log", str(tmp_path), *extra, timeout=120)
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "no metadata log" in lines[0], done.stderr
