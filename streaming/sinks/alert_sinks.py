"""Where alerts go, once per micro-batch on the driver: the alerts topic (idempotent producer,
key = alert_id), a JSON-lines file, the console, Prometheus Alertmanager's API v2.

Spark re-runs the last micro-batch after a crash; a small ledger in the checkpoint folder
names the last batch every sink took, so a re-run batch is not delivered twice. A batch the job
died in the middle of delivering is marked pending: its re-run reads the alerts topic back and
sends only what is not there yet."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from zkcdc.ground.kafka_connection import KafkaConnection, KafkaConnectionError, NoSuchTopic
from zkcdc.ground.private_files import atomic_write
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.sinks.alertmanager_notifier import AlertmanagerNotifier, NotifierThread


class AlertText(NamedTuple):
    """An alert as the job hands it to the sinks: its JSON text (`Alert.as_text`) and what the
    sinks need of it without parsing it again."""

    alert_id: str
    status: str
    at_ms: int  # event time: the start of a FIRING, the end of a RESOLVED
    text: str


@dataclass(frozen=True)
class SinkOptions:
    kafka: KafkaConnection | None = None  # publish alerts there
    alerts_topic: str = "zkcdc.alerts"
    alerts_out: Path | None = None
    console: bool = False
    alertmanager: str | None = None
    alertmanager_resend_s: float = 60.0

    @property
    def files_only(self) -> bool:
        """Alerts go to the JSON-lines file alone (Spark can write them itself)."""
        return (
            self.alerts_out is not None
            and not self.kafka
            and not self.console
            and not self.alertmanager
        )


def produce_all(producer: Any, topic: str, records: list[tuple[str, str | None]]) -> None:
    """Each (key, value or None = tombstone) in order, then waits until all are delivered."""
    for key, value in records:
        while True:
            try:
                producer.produce(
                    topic, key=key.encode(), value=None if value is None else value.encode()
                )
                break
            except BufferError:  # the local queue is full (a replay's burst): let it drain
                producer.poll(0.1)
    if producer.flush(60) > 0:
        raise StreamingError(f"records not delivered to {topic} within 60 s")


def ensure_topics(
    kafka: KafkaConnection, topics: list[str], config: dict[str, str] | None = None
) -> None:
    """Creates missing topics up front (replication min(3, brokers)): auto-creation at the
    first alert would fail exactly when a broker is down, which is when alerts come."""
    for topic in topics:
        try:
            kafka.ensure_topic(topic, 3, 30.0, config)
        except KafkaConnectionError as exc:
            raise StreamingError(f"cannot use topic {topic} on {kafka.describe()}: {exc}") from exc


def alert_key(line: str) -> tuple[str, str] | None:
    """(alert_id, status) of an alert line, None for a line that is not one."""
    try:
        alert = json.loads(line)
        return alert["alert_id"], alert["status"]
    except (ValueError, KeyError, TypeError):
        return None


def _ends_unfinished(path: Path) -> bool:
    with path.open("rb") as file:
        if file.seek(0, 2) == 0:
            return False
        file.seek(-1, 2)
        return file.read(1) != b"\n"


class BatchLedger:
    """The last micro-batch every sink took, in the checkpoint folder."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def last(self) -> int:
        try:
            return int(self.path.read_text())
        except (OSError, ValueError):
            return -1

    def mark(self, batch_id: int) -> None:
        """Every sink took `batch_id`."""
        self._write(self.path, str(batch_id))
        self._pending_file.unlink(missing_ok=True)

    def begin(self, batch_id: int, now_ms: int) -> None:
        """`batch_id` is about to be delivered (at wall time `now_ms`)."""
        self._write(self._pending_file, f"{batch_id} {now_ms}")

    def pending(self) -> tuple[int, int] | None:
        """(batch, wall ms) of a delivery that began and never finished."""
        try:
            batch, ms = self._pending_file.read_text().split()
            return int(batch), int(ms)
        except (OSError, ValueError):
            return None

    @property
    def _pending_file(self) -> Path:
        return self.path.with_name(self.path.name + ".pending")

    def _write(self, path: Path, text: str) -> None:
        atomic_write(path, text)


class AlertSinks:
    def __init__(self, options: SinkOptions, checkpoint: Path | None = None) -> None:
        """`checkpoint`: the job's checkpoint folder, where what Alertmanager is still due is
        kept between runs."""
        self.options = options
        self._producer: Any = None
        self._alertmanager: NotifierThread | None = None
        if options.alertmanager:
            notifier = AlertmanagerNotifier(
                options.alertmanager,
                resend_s=options.alertmanager_resend_s,
                state_file=None if checkpoint is None else checkpoint / "alertmanager.json",
            )
            self._alertmanager = NotifierThread(notifier)
        if options.kafka:
            ensure_topics(options.kafka, [options.alerts_topic])
            self._producer = options.kafka.producer({"enable.idempotence": True, "acks": "all"})

    def delivered(self, since_ms: int) -> set[tuple[str, str]]:
        """(alert_id, status) of the alerts already in the sinks that can be read back: the
        alerts topic (from `since_ms` on) and the JSON-lines file."""
        found = self._on_topic(since_ms) if self.options.kafka else set()
        out = self.options.alerts_out
        if out is not None and out.exists():
            with out.open() as lines:
                # None for a line cut short by the crash
                found.update(key for line in lines if (key := alert_key(line)) is not None)
        return found

    def _on_topic(self, since_ms: int) -> set[tuple[str, str]]:
        assert self.options.kafka is not None
        found: set[tuple[str, str]] = set()

        def take(message: Any) -> None:
            try:
                alert = json.loads(message.value())
                found.add((alert["alert_id"], alert["status"]))
            except (ValueError, KeyError, TypeError):
                pass  # not one of ours

        try:
            self.options.kafka.read_to_end(self.options.alerts_topic, take, since_ms, 30.0)
        except NoSuchTopic:
            pass
        except KafkaConnectionError as exc:
            raise StreamingError(str(exc)) from exc
        return found

    def deliver(self, alerts: list[AlertText]) -> None:
        alerts.sort(key=lambda a: a.at_ms)
        if self._producer is not None and alerts:
            produce_all(
                self._producer,
                self.options.alerts_topic,
                [(alert.alert_id, alert.text) for alert in alerts],
            )
        lines = [alert.text for alert in alerts]
        if self.options.alerts_out is not None and lines:
            self.start_line(self.options.alerts_out)
            with self.options.alerts_out.open("a") as out:
                out.write("\n".join(lines) + "\n")
        if self.options.console:
            for line in lines:
                print(line, flush=True)
        if self._alertmanager is not None and alerts:
            self._alertmanager.notifier.update([json.loads(a.text) for a in alerts])

    @staticmethod
    def start_line(path: Path) -> None:
        """A line a crash cut short stays a line of its own: what is appended starts anew."""
        if path.exists() and _ends_unfinished(path):
            with path.open("a") as out:
                out.write("\n")

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
        if self._alertmanager is not None:
            self._alertmanager.close()
