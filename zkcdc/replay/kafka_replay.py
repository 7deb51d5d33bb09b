"""`zkcdc replay PATH --bootstrap-servers B`: an event log back onto a changes topic, encoded
and keyed as capture publishes (single-object Avro, key = cluster + path, seq and cluster
headers, the original capture time as timestamp), paced by `--speed`. Records are copied as
the log holds them (same schema: its bytes behind the single-object header), not decoded.

Resuming: a checkpoint file names, per cluster, the last seq up to which everything was
acknowledged. A restarted replay skips those and reads back from the topic which of the later
ones the killed run got onto it anyway (the headers carry the seq), so nothing goes twice."""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from zkcdc.capture.delivery.event_log import Damage, Span, cluster_of, log_files, read_spans
from zkcdc.capture.delivery.publisher import (
    PARTITIONER,
    headers_for,
    heartbeat_partition,
    key_for,
    producer_config,
)
from zkcdc.capture.delivery.topic_guard import TopicChangedError, settled_count
from zkcdc.capture.delivery.topic_holdings import delivered_seqs
from zkcdc.capture.encoding.avro_codec import CodecError, SingleObjectCodec, confluent_header
from zkcdc.capture.errors import CaptureError
from zkcdc.ground.connect_timeout import connect_timeout_s
from zkcdc.ground.kafka_connection import KafkaConnection, KafkaConnectionError
from zkcdc.ground.private_files import atomic_write
from zkcdc.replay.errors import ReplayError
from zkcdc.replay.pacing import Pacer, merged

RESUME_MARGIN_MS = 60_000  # capture times are wall-clock: allow for a little disorder


@dataclass
class Checkpoint:
    path: Path
    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # cluster -> (seq, captured)
    started: bool = False  # a run began sending (saved before its first record)
    done: bool = False

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        try:
            obj = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError) as exc:
            raise ReplayError(f"unreadable replay checkpoint {path}: {exc}") from exc
        acked = {c: (int(v[0]), int(v[1])) for c, v in obj.get("acked", {}).items()}
        return cls(path, acked, bool(obj.get("started")), bool(obj.get("done")))

    def save(self) -> None:
        atomic_write(
            self.path, json.dumps({"acked": self.acked, "started": self.started, "done": self.done})
        )


def _by_cluster(log: Path) -> list[list[Path]]:
    files: dict[str, list[Path]] = {}
    for file in log_files(log):
        files.setdefault(cluster_of(file), []).append(file)
    return [group for _, group in sorted(files.items())]


def span_streams(log: Path, on_damage: Callable[[Damage], None]) -> list[Iterator[Span]]:
    """One stream of record bytes per cluster of the log, each in seq order."""
    return [_spans_of(group, on_damage) for group in _by_cluster(log)]


def _spans_of(files: list[Path], on_damage: Callable[[Damage], None]) -> Iterator[Span]:
    for file in files:
        for block in read_spans(file, on_damage):
            yield from block


@dataclass
class ReplayToKafka:
    log: Path
    kafka: KafkaConnection
    topic: str
    checkpoint: Checkpoint
    speed: float = 0.0
    progress: Callable[[int], None] = lambda n: None
    on_damage: Callable[[Damage], None] = lambda d: None
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    registry: str | None = None  # Confluent's wire format, the schema registered there
    sent: int = 0
    skipped: int = 0
    _partitions: int = 0  # the topic's, once run() has asked

    def run(self) -> None:
        try:
            self.kafka.ensure_topic(self.topic, 6, connect_timeout_s())
            # Heartbeats to every partition, as capture sends them (publisher.
            # heartbeat_partition): the count taken once Kafka's metadata shows the partitions
            # (a topic made a moment ago is listed before them, and heartbeats then went
            # wherever the partitioner put them).
            self._partitions = settled_count(self.kafka.admin(), self.topic, connect_timeout_s())
        except (KafkaConnectionError, TopicChangedError) as exc:
            raise ReplayError(str(exc)) from exc
        try:
            header = (
                confluent_header(self.registry, self.topic)
                if self.registry
                else SingleObjectCodec().header
            )
        except CodecError as exc:
            raise ReplayError(str(exc)) from exc
        refused: list[str] = []

        def failed(error: KafkaError | None, _: Any) -> None:
            if error is not None:
                refused.append(error.str())

        # Only failures are reported: a Python callback per record cost a fifth of a replay's
        # time. What is acknowledged is known at each flush instead (see `_flushed`).
        producer = self.kafka.producer(
            {**producer_config(), "delivery.report.only.error": True, "on_delivery": failed}
        )
        sent = dict(self.checkpoint.acked)  # cluster -> (seq, captured) of its last record sent
        done = {cluster: seq for cluster, (seq, _) in sent.items()}
        already = self._already_delivered() if self.checkpoint.started else {}
        self.checkpoint.started = True
        self.checkpoint.save()  # before the first record: a rerun then reads the topic back
        pacer = Pacer(self.speed, self.monotonic, self.sleep)
        # Paced, every record is served at once; flat out, polls and progress go by thousands.
        every = 1 if self.speed > 0 else 1000
        last_save, pending = self.monotonic(), 0
        spans = merged(
            span_streams(self.log, self.on_damage),
            operator.attrgetter("ts_ms"),
            operator.attrgetter("seq"),
        )
        try:
            for span in spans:
                cluster, seq = span.cluster, span.seq
                if seq <= done.get(cluster, -1) or seq in already.get(cluster, ()):
                    self.skipped += 1
                    self.progress(1)
                    continue
                pacer.wait_for(span.ts_ms)
                self._produce(producer, header, span)
                sent[cluster] = (seq, span.captured_ms)  # a cluster's records go in seq order
                self.sent += 1
                pending += 1
                if pending >= every:
                    producer.poll(0)
                    _raise_refused(refused, self.topic)
                    self.progress(pending)
                    pending = 0
                    if self.monotonic() - last_save > 1.0:
                        self._flushed(producer, sent, refused, 5.0)
                        last_save = self.monotonic()
            self.progress(pending)
            while not self._flushed(producer, sent, refused, 5.0):
                pass
        finally:
            producer.poll(0)
        self.checkpoint.done = True
        self.checkpoint.save()

    def _flushed(
        self,
        producer: Producer,
        sent: dict[str, tuple[int, int]],
        refused: list[str],
        timeout: float,
    ) -> bool:
        """Waits up to `timeout` for every record sent to be acknowledged; when all are (and
        none was refused), what was sent is the resume point."""
        remaining = producer.flush(timeout)
        _raise_refused(refused, self.topic)
        if remaining == 0:
            self._save(sent)
        return remaining == 0

    def _produce(self, producer: Producer, header: bytes, span: Span) -> None:
        # Only a heartbeat has no path.
        partition = heartbeat_partition(span.seq, self._partitions) if not span.path else None
        while True:
            try:
                producer.produce(
                    self.topic,
                    value=header + span.body,
                    key=key_for(span.cluster, span.path),
                    timestamp=span.captured_ms,
                    headers=headers_for(span.cluster, span.seq),
                    partition=PARTITIONER if partition is None else partition,
                )
                return
            except BufferError:
                producer.poll(0.05)  # librdkafka's queue is full: let acks drain it
            except KafkaException as exc:
                raise ReplayError(f"cannot produce to {self.topic}: {exc}") from exc

    def _save(self, acked: dict[str, tuple[int, int]]) -> None:
        self.checkpoint.acked = dict(acked)
        self.checkpoint.save()

    def _already_delivered(self) -> dict[str, set[int]]:
        """What a killed run got onto the topic after its last checkpoint (for a cluster it
        saved nothing of: since that cluster's first record)."""
        found = {}
        for stream in span_streams(self.log, lambda damage: None):
            first = next(stream, None)
            if first is None:
                continue
            cluster = first.cluster
            captured = self.checkpoint.acked.get(cluster, (-1, first.captured_ms))[1]
            try:
                found[cluster] = delivered_seqs(
                    self.kafka, self.topic, cluster, captured - RESUME_MARGIN_MS, 60.0
                )
            except CaptureError as exc:
                raise ReplayError(str(exc)) from exc
        return found


def _raise_refused(refused: list[str], topic: str) -> None:
    if refused:
        raise ReplayError(f"Kafka refused a record for {topic}: {refused[0]}")
