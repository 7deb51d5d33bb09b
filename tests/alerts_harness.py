"""Running `zkcdc stream alerts` as users run it, and reading the alerts topic as JSON."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import psutil
from capture_harness import TopicReader
from confluent_kafka import Producer

from zkcdc.ground import waiting
from zkcdc.streaming.job.compiler_priority import compiler_threads, thread_names

T = TypeVar("T")


Alerts = Counter[tuple[str, str, int, int | None]]


def alerts_of(file: Path) -> Alerts:
    """Each alert line as a multiset: one delivered twice makes the live-vs-replay compare fail."""
    rows = [json.loads(line) for line in file.read_text().splitlines()]
    return Counter((a["alert_id"], a["status"], a["started_ms"], a["ended_ms"]) for a in rows)


# A line of a Java stack trace ("\tat org.apache...(File.java:12)") or a Java exception's name.
JAVA_TRACE = re.compile(r"^\s+at [\w$.<>/]+\(|\bjava\.lang\.\w+(Error|Exception)\b")


class AlertJob:
    def __init__(self, args: list[str], log_file: Path) -> None:
        self.args = args
        self.log_file = log_file
        self._log = log_file.open("ab")
        # A process group of its own, as a supervisor or a terminal starts a command: a signal
        # to the group (stop_quietly) reaches the job and what it started, not the tests.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zkcdc", "stream", "alerts", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )

    def option(self, name: str) -> str:
        return self.args[self.args.index(name) + 1]

    def wait_started(self, timeout_s: float = 300) -> None:
        """Until the job has committed its first micro-batch. A test that then waits for an
        incident's alert times the job's work, not Spark's start: under the suite's load a
        driver took 84 s to start and its first stage a minute more."""
        checkpoint = Path(self.option("--checkpoint"))
        self.wait_until(lambda: committed(checkpoint) or None, "no micro-batch committed",
                        timeout_s, interval_s=0.5)  # fmt: skip

    def wait_until(
        self, found: Callable[[], T | None], failure: str, timeout_s: float, interval_s: float = 0
    ) -> T:
        """The first value `found` gives that is not None; fails with the job's log when the
        job exits or the time is up, so a slow or broken job is told apart from a lost result."""
        held = waiting.wait_until(
            lambda: (value,) if (value := found()) is not None else None,
            timeout_s, what=failure, interval_s=interval_s, abandon=self._exited,
            detail=self.tail,
        )  # fmt: skip
        return held[0]

    def _exited(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"the alert job exited {code}"

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout_s)
        self._log.close()
        return code

    def stop_quietly(self, within_s: float = 30, group: bool = False) -> None:
        """A supervisor's SIGTERM: the job exits 0 within `within_s`, and nothing it writes
        after the signal is a Java stack trace. `group`: sent to the job's whole process group,
        as a terminal's hang-up, `timeout` or a supervisor that stops a group sends it."""
        before = self.log_file.stat().st_size
        if group:
            os.killpg(self.process.pid, signal.SIGTERM)
        else:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(within_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"running {within_s:.0f} s after SIGTERM:\n{self.tail()}"
            ) from None
        self._log.close()
        after = self.log_file.read_bytes()[before:].decode(errors="replace")
        lines = after.splitlines()
        first = next((i for i, line in enumerate(lines) if JAVA_TRACE.search(line)), None)
        assert code == 0, f"exit {code} after SIGTERM:\n{self.tail()}"
        # The lines before the trace name what was thrown (an ERROR line, Spark's message).
        assert first is None, "a Java stack trace after SIGTERM:\n" + "\n".join(
            lines[max(0, first - 3) : first + 12]
        )

    def compiler_niceness(self) -> dict[int, int]:
        """The niceness of each JIT compiler thread of the job's driver JVM, by thread id
        (empty while there is no JVM yet)."""
        try:
            jvms = [p.pid for p in psutil.Process(self.process.pid).children(recursive=True)
                    if p.name() == "java"]  # fmt: skip
        except psutil.Error:  # a child gone while listed: asked again
            return {}
        out = {}
        for pid in jvms:
            for tid in compiler_threads(thread_names(pid)):
                with contextlib.suppress(OSError):
                    out[tid] = os.getpriority(os.PRIO_PROCESS, tid)
        return out

    def tail(self, lines: int = 60) -> str:
        text = self.log_file.read_text(errors="replace").splitlines()
        kept = [line for line in text if not line.lstrip().startswith("at ")]
        return "\n".join(kept[-lines:])


class AlertsTopic(TopicReader):
    """Every alert on an alerts topic, from the beginning, in arrival order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.alerts: list[dict[str, Any]] = []
        self.arrived_ms: dict[tuple[str, str], int] = {}  # (alert_id, status) -> topic time

    def take(self, message: Any) -> None:
        alert = json.loads(message.value())
        assert message.key().decode() == alert["alert_id"]
        self.alerts.append(alert)
        self.arrived_ms[(alert["alert_id"], alert["status"])] = message.timestamp()[1]

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        what: str,
        timeout_s: float,
        job: AlertJob,
    ) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            self.poll(1000)
            return next((a for a in self.alerts if predicate(a)), None)

        return job.wait_until(found, f"no alert {what}", timeout_s)


class ChangesProducer:
    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap})

    def send(self, topic: str, value: bytes) -> None:
        self.producer.produce(topic, value=value, key=b"test")

    def __enter__(self) -> ChangesProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.producer.flush(30) == 0


class DeadLetters(TopicReader):
    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.letters: list[dict[str, Any]] = []

    def take(self, message: Any) -> None:
        self.letters.append(json.loads(message.value()))

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        what: str,
        timeout_s: float,
        job: AlertJob,
    ) -> dict[str, Any]:
        """The first letter `predicate` accepts; fails with the job's log when the job exits
        or the time is up, so a slow or broken job is told apart from a lost letter."""

        def found() -> dict[str, Any] | None:
            self.poll()
            return next((d for d in self.letters if predicate(d)), None)

        return job.wait_until(found, f"no {what} on {self.topic}", timeout_s)


def receiver_port() -> int:
    """A port for a receiver that a test stops and starts again: below the kernel's ephemeral
    range, so no client's or JVM's port taken meanwhile lands on it (py4j's callback
    server once took a stopped receiver's port and answered the webhook's POST)."""
    from zkcdc.stack.probes import free_port_block

    return free_port_block(1)


class Receiver:
    """A webhook receiver on 127.0.0.1:`port`: keeps every JSON body POSTed, answers 204."""

    def __init__(self, port: int) -> None:
        self.taken: list[dict[str, Any]] = []
        taken = self.taken

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                taken.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def committed(checkpoint: Path) -> list[int]:
    """The micro-batches the alert job whose `--checkpoint` is `checkpoint` has committed."""
    commits = checkpoint / "alerts" / "commits"
    return [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []


def job_read_to(checkpoint: Path, topic: str, ends: dict[int, int]) -> bool:
    """Whether the alert job whose `--checkpoint` is `checkpoint` finished a micro-batch (its
    sinks written, the batch committed) that read `topic` up to `ends` (next offsets): the job
    has drained what the topic held, no clock needed."""
    done = committed(checkpoint)
    if not done:
        return False
    for line in (checkpoint / "alerts" / "offsets" / str(max(done))).read_text().splitlines()[1:]:
        try:
            read = json.loads(line)
        except ValueError:
            continue
        if isinstance(read, dict) and topic in read:
            at = {int(p): int(o) for p, o in read[topic].items()}
            return all(at.get(p, 0) >= end for p, end in ends.items() if end > 0)
    return False


def state_store_writes(checkpoint: Path) -> dict[str, int]:
    """Bytes of changelog each task of the alert job's stateful stage wrote, by task number: a
    task that held no group writes empty changelogs."""
    stores = checkpoint / "alerts" / "state" / "0"
    return {
        task.name: sum(f.stat().st_size for f in task.glob("*.changelog"))
        for task in stores.iterdir()
        if task.name.isdigit()
    }
