"""Running `zkcdc stream alerts` as users run it, and reading the alerts topic as JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition


class AlertJob:
    def __init__(self, args: list[str], log_file: Path) -> None:
        self.log_file = log_file
        self._log = log_file.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zkcdc", "stream", "alerts", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout_s)
        self._log.close()
        return code

    def tail(self, lines: int = 60) -> str:
        text = self.log_file.read_text(errors="replace").splitlines()
        kept = [line for line in text if not line.lstrip().startswith("at ")]
        return "\n".join(kept[-lines:])


class AlertsTopic:
    """Every alert on an alerts topic, from the beginning, in arrival order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.alerts: list[dict[str, Any]] = []
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"test-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self._assigned = False

    def poll(self) -> None:
        if not self._assigned:
            metadata = self._consumer.list_topics(self.topic, timeout=10)
            partitions = metadata.topics[self.topic].partitions
            if not partitions:
                return
            self._consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions]
            )
            self._assigned = True
        for message in self._consumer.consume(1000, 0.5):
            if message.error():
                continue
            alert = json.loads(message.value())
            assert message.key().decode() == alert["alert_id"]
            self.alerts.append(alert)

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        what: str,
        timeout_s: float,
        job: AlertJob,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll()
            found = [a for a in self.alerts if predicate(a)]
            if found:
                return found[0]
            if job.process.poll() is not None:
                raise AssertionError(f"alert job exited {job.process.returncode}:\n{job.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no alert {what} in {timeout_s:.0f}s:\n{job.tail()}")

    def close(self) -> None:
        self._consumer.close()
