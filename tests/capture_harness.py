"""Running `zkcdc capture` as the real process users run, and reading what it published with a
plain fastavro reader from the `.avsc` (not through the daemon's own code)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from fastavro.schema import fingerprint, to_parsing_canonical_form

from zkcdc.ground import waiting

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "avro" / "ChangeRecord.avsc"
SCHEMA = fastavro.parse_schema(json.loads(SCHEMA_FILE.read_text()))
HEADER = b"\xc3\x01" + bytes.fromhex(fingerprint(to_parsing_canonical_form(SCHEMA), "CRC-64-AVRO"))


def decode(value: bytes) -> dict[str, Any]:
    assert value[:10] == HEADER, f"not single-object encoded with our schema: {value[:10].hex()}"
    return fastavro.schemaless_reader(io.BytesIO(value[10:]), SCHEMA, SCHEMA)  # type: ignore[return-value]


class CaptureProcess:
    """One `zkcdc capture` process; its log is kept in a file and shown when a test fails."""

    def __init__(self, args: list[str], log_file: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.log_file = log_file
        self._log = log_file.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zkcdc", "capture", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_file.read_text(errors="replace").splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"event": line})
        return lines

    def logged(self, event: str) -> bool:
        return any(line.get("event") == event for line in self.log_lines())

    def wait_logged(self, event: str, timeout_s: float = 60) -> None:
        waiting.wait_until(
            lambda: self.logged(event), timeout_s, what=f"capture to log {event!r}",
            abandon=self._exited, detail=self.report,
        )  # fmt: skip

    def _exited(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"capture exited {code}"

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout_s)
        self._log.close()
        return code

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def report(self, lines: int = 80) -> str:
        """The log's end for a failure's report, with each run of librdkafka's lines cut to its
        first and a count: while brokers are down it writes thousands of "connect failed", and
        the last 80 lines of stop 48's CI failure held none of the daemon's own."""
        return "\n".join(collapsed_library_runs(self.log_file.read_text(errors="replace"))[-lines:])


def collapsed_library_runs(text: str, library: str = '"logger": "zkcdc.librdkafka') -> list[str]:
    out: list[str] = []
    run = 0
    for line in [*text.splitlines(), ""]:
        if library in line:
            if run == 0:
                out.append(line)
            run += 1
            continue
        if run > 1:
            out.append(f"[... {run - 1} more librdkafka lines]")
        run = 0
        if line:
            out.append(line)
    return out


class TopicReader:
    """A topic read from the beginning by a consumer of its own; `take` keeps each message."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self._bootstrap = bootstrap
        self._admin: AdminClient | None = None  # for the topic's ends, made when first asked
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"test-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
                # What a consumer of capture's topic must read: committed records only.
                "isolation.level": "read_committed",
                "enable.partition.eof": True,  # a transactional topic ends in commit markers
                # Its "connect failed" lines while a test holds brokers down would crowd the
                # daemons' logs out of a failure's report.
                "log_level": 2,
            }
        )
        self._assigned = False
        self._eof: dict[int, int] = {}  # partition -> offset of its latest end reached

    def take(self, message: Any) -> None:
        raise NotImplementedError

    def poll(self, max_messages: int = 5000) -> None:
        if not self._assigned:
            metadata = self._consumer.list_topics(self.topic, timeout=10)
            partitions = metadata.topics[self.topic].partitions
            if not partitions:
                return
            self._consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions]
            )
            self._assigned = True
        # Up to half a second for the first message, then 50 ms for the rest of its burst:
        # consume(n, 0.5) alone waits out the half second unless n messages come, and the
        # suite polls thousands of times (50 ms, not 0: a caller's loop over a steady stream
        # rescans what it holds at most ~20 times a second).
        first = self._consumer.poll(0.5)
        if first is None:
            return
        for message in [first, *self._consumer.consume(max_messages - 1, 0.05)]:
            error = message.error()
            if error is None:
                self.take(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                self._eof[message.partition() or 0] = message.offset() or 0

    def ends(self) -> dict[int, int]:
        """Each partition's high watermark now (the offset the next message will get), in one
        admin request: the consumer's get_watermark_offsets waits behind its long-polling
        fetch (fetch.wait.max.ms, 500 ms) partition by partition, ~2.5 s for six."""
        metadata = self._consumer.list_topics(self.topic, timeout=10)
        wanted = {
            TopicPartition(self.topic, p): OffsetSpec.latest()
            for p in metadata.topics[self.topic].partitions
        }
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self._bootstrap, "log_level": 2})
        futures = self._admin.list_offsets(wanted, request_timeout=10)
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    def read_to_end(self, timeout_s: float = 60) -> None:
        """Everything the topic holds now, up to each partition's high watermark: once its
        producers have stopped, anything they sent twice is read too (no wait for it needed)."""
        self.poll()

        def read_up() -> bool:
            if not self._assigned:
                return True
            ends = self.ends()
            for p in self._consumer.assignment():
                (at,) = self._consumer.position([TopicPartition(self.topic, p.partition)])
                if ends[p.partition] > max(at.offset, self._eof.get(p.partition, 0), 0):
                    self.poll()
                    return False
            return True

        waiting.wait_until(read_up, timeout_s, what=f"{self.topic} read to its end", interval_s=0)

    def close(self) -> None:
        self._consumer.close()


class ChangesTopic(TopicReader):
    """Everything on a changes topic, read from the beginning and kept in arrival order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(bootstrap, topic)
        self.records: list[dict[str, Any]] = []
        self.keys: list[bytes] = []

    def take(self, message: Any) -> None:
        self.records.append(decode(message.value()))
        self.keys.append(message.key())

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], what: str, timeout_s: float = 90
    ) -> list[dict[str, Any]]:
        def found() -> list[dict[str, Any]]:
            self.poll()
            return [r for r in self.records if predicate(r)]

        return waiting.wait_until(
            found, timeout_s, what=f"a record with {what} on {self.topic}", interval_s=0
        )

    def wait_event(
        self,
        event_type: str,
        timeout_s: float = 90,
        snapshot: bool = False,
        after_seq: int = 0,
        **fields: Any,
    ) -> dict[str, Any]:
        """The first event of `event_type` whose fields match (lists compared as given), from
        live records only unless `snapshot`, and only in records after `after_seq`. The event
        comes with its record's seq as `_seq`."""

        def matches(record: dict[str, Any]) -> bool:
            if (record["op"] == "READ" and not snapshot) or record["seq"] <= after_seq:
                return False
            return any(_event_matches(e, event_type, fields) for e in record["events"])

        record = self.wait_for(matches, f"event {event_type} {fields}", timeout_s)[0]
        event = next(e for e in record["events"] if _event_matches(e, event_type, fields))
        return {**event, "_seq": record["seq"]}


def _event_matches(event: dict[str, Any], event_type: str, fields: dict[str, Any]) -> bool:
    return event["type"] == event_type and all(event.get(k) == v for k, v in fields.items())


def changes(records: Iterable[dict[str, Any]]) -> list[tuple[str, int]]:
    """(path, version) of every create/update in order: what 'each change once' is counted by."""
    return [
        (r["path"], r["after"]["version"])
        for r in records
        if r["op"] in ("CREATE", "UPDATE", "READ") and r["after"] is not None
    ]
