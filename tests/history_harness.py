"""The kept event log as the history tests use it: its records, a topic holding it, and
`zkcdc` run as users run it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from zkcdc.capture.delivery.event_log import log_files, read_records
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.topic_creation import ensure_topic

FIXTURE_LOG = Path(__file__).parent / "fixtures" / "event_log_v1"


def zkcdc(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkcdc", *args], capture_output=True, text=True,
                          timeout=timeout_s)  # fmt: skip


def topic_of_the_kept_log(bootstrap_servers: str, name: str, work: Path) -> str:
    """A topic holding the kept log, replayed into it. The records carry their capture time
    (2026-11) as Kafka timestamp: the topic keeps them whatever their age (the broker's time
    retention would delete them within minutes)."""
    kafka = KafkaConnection(bootstrap_servers=bootstrap_servers)
    topic = f"zkcdc.history.{name}.{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka.admin, lambda: kafka.list_topics(15), topic, 6, 60,
                 {"retention.ms": "-1"})  # fmt: skip
    run = zkcdc("replay", str(FIXTURE_LOG), "--bootstrap-servers", bootstrap_servers,
                "--topic", topic, "--speed", "0", "--checkpoint", str(work / f"{name}.json"))  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return topic


def fixture_records() -> list[dict[str, Any]]:
    records = [r for f in log_files(FIXTURE_LOG) for r in read_records(f, lambda d: None)]
    return sorted(records, key=lambda r: r["seq"])
