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
from zkcdc.streaming.rules.alert_engine import AlertEngine

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


def _current_at(row: dict[str, Any], seq: int) -> bool:
    return row.get("valid_to_seq") is None or seq < row["valid_to_seq"]


PARTITION_FIELDS = ("replicas", "adding", "removing", "leader", "isr", "leader_epoch",
                    "controller_epoch")  # fmt: skip


def assert_partition_states_are_the_engines(
    intervals: list[dict[str, Any]], records: list[dict[str, Any]]
) -> None:
    """At every change of every cluster in `records`, the `partition_states` rows current then
    are the rules engine's partitions, one interval a partition. A row's null fields may be
    missing (JSON from Spark leaves them out)."""
    clusters: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        clusters.setdefault(record["cluster"], []).append(record)
    for cluster, mine in clusters.items():
        rows = sorted((r for r in intervals if r["cluster"] == cluster),
                      key=lambda r: r["valid_from_seq"])  # fmt: skip
        engine, current, begun = AlertEngine(cluster), dict[Any, dict[str, Any]](), 0
        for record in sorted(mine, key=lambda r: r["seq"]):
            engine.process(record)
            seq = record["seq"]
            while begun < len(rows) and rows[begun]["valid_from_seq"] <= seq:
                row, key = rows[begun], (rows[begun]["topic"], rows[begun]["partition"])
                assert key not in current or not _current_at(current[key], seq), (
                    f"two intervals of {key} at seq {seq}"
                )
                current[key] = row
                begun += 1
            got = {key: tuple(row.get(f) for f in PARTITION_FIELDS)
                   for key, row in current.items() if _current_at(row, seq)}  # fmt: skip
            want = {
                key: tuple(list(v) if isinstance(v, tuple) else v
                           for v in (getattr(p, f) for f in PARTITION_FIELDS))
                for key, p in engine.state.partitions.items()
            }  # fmt: skip
            differ = {key: (got.get(key), want.get(key))
                      for key in got.keys() | want.keys() if got.get(key) != want.get(key)}  # fmt: skip
            assert not differ, (cluster, seq, "lake, engine:", differ)
