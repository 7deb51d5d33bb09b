"""`--metrics-port`: Prometheus metrics at `/metrics` and liveness at `/healthz`."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from zkcdc.capture.records import ChangeRecord


class CaptureMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records = Counter(
            "zkcdc_capture_records", "Change records given out", ["op"], registry=r
        )
        self.events = Counter(
            "zkcdc_capture_events", "Typed events in the records", ["type"], registry=r
        )
        self.versions_skipped = Counter(
            "zkcdc_capture_versions_skipped", "Versions no read could observe", registry=r
        )
        self.lag = Histogram(
            "zkcdc_capture_lag_seconds",
            "ZooKeeper mtime of a change to Kafka's acknowledgement of its record",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.backlog = Gauge(
            "zkcdc_capture_backlog", "Records not yet acknowledged by Kafka", registry=r
        )
        self.session = Gauge(
            "zkcdc_capture_zookeeper_connected",
            "1 while the ZooKeeper session is usable",
            registry=r,
        )
        self.active = Gauge(
            "zkcdc_capture_active", "1 on the elected (active) daemon, 0 on a standby", registry=r
        )
        self.elections = Counter(
            "zkcdc_capture_elections",
            "Turns of this daemon's role: to active (won), to standby (lost a term)",
            ["to"],
            registry=r,
        )
        self.seq = Gauge("zkcdc_capture_seq", "Last seq given out", registry=r)
        self.queue_bound = Gauge(
            "zkcdc_capture_queue_bound",
            "The most each of capture's in-memory queues holds (unit in the queue's name); "
            "what does not fit waits in the event log or at ZooKeeper",
            ["queue"],
            registry=r,
        )
        self.watch_inbox = Gauge(
            "zkcdc_capture_watch_inbox",
            "Messages (reads, watch events) waiting in the watch source's inbox at a turn's "
            "start: ZooKeeper's pushes, taken at most 50,000 a turn; it stays near 0 while the "
            "daemon keeps up, because the event log, not Kafka, paces a turn",
            registry=r,
        )
        self.unreadable = Gauge(
            "zkcdc_capture_unreadable_znodes",
            "Znodes ZooKeeper will not let capture read (no READ in their ACL)",
            registry=r,
        )

    def given_out(self, records: Sequence[ChangeRecord]) -> None:
        """Counts a batch of records: one increment per label, not per record (a labelled
        increment costs a few microseconds, several per record under a storm)."""
        ops = collections.Counter(record.op.value for record in records)
        types = collections.Counter(e.type.value for record in records for e in record.events)
        skipped = sum(record.versions_skipped for record in records)
        for op, n in ops.items():
            self.records.labels(op).inc(n)
        for kind, n in types.items():
            self.events.labels(kind).inc(n)
        if skipped:
            self.versions_skipped.inc(skipped)
        if records:
            self.seq.set(records[-1].seq)
