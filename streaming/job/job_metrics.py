"""`zkcdc stream alerts --metrics-port`: what an operator (and deploy/prometheus's rules) needs
to see that the alert job lives and keeps up."""

from __future__ import annotations

import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# A micro-batch's sinks' times remembered for its log line until it is said; more (the line
# never said: a stop) are let go, oldest first.
_SINKS_TIMES_KEPT = 64


class JobMetrics:
    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self.registry = CollectorRegistry()
        r = self.registry
        self.batches = Counter("zkcdc_alerts_batches", "Micro-batches delivered", registry=r)
        self.alerts = Counter(
            "zkcdc_alerts_delivered", "Alerts handed to the sinks", ["status"], registry=r
        )
        self.last_batch = Gauge(
            "zkcdc_alerts_last_batch_timestamp_seconds",
            "Wall time the last micro-batch was delivered",
            registry=r,
        )
        self.running = Gauge("zkcdc_alerts_running", "1 while the Spark query runs", registry=r)
        self.records_behind = Gauge(
            "zkcdc_alerts_records_behind",
            "Change records between where the last micro-batch stopped reading and the end "
            "the changes topic had then (streaming/job/catch_up.py)",
            registry=r,
        )
        # The order the records are placed in (streaming/rules/seq_order.py), per cluster.
        self.order = Counter(
            "zkcdc_alerts_order_records",
            "Change records by what placing them in seq order found: gap (a missing seq known "
            "never to come, passed), unproven (one passed past a silent partition), unplaced "
            "(a record come after its place was passed: counted, not fed to the rules), "
            "duplicate (seen before)",
            ["cluster", "outcome"],
            registry=r,
        )
        self.waiting = Gauge(
            "zkcdc_alerts_order_waiting",
            "Change records waiting for an earlier seq (bounded: a partition silent for "
            "seq_order.SILENT_MS of event time stops being waited for)",
            ["cluster"],
            registry=r,
        )
        self.sinks_seconds = Histogram(
            "zkcdc_alerts_sinks_seconds",
            "How long a micro-batch's alerts, state upserts and dead letters took to reach "
            "their sinks once Spark had handed its rows to the driver",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=r,
        )
        self._sinks_ms: dict[int, int] = {}
        self._lock = threading.Lock()
        self._started = False
        self._warming_up = False
        self._catching_up: int | None = None  # records behind, while catching up

    def delivered(self, statuses: Iterable[str]) -> None:
        for status, n in Tally(statuses).items():
            self.alerts.labels(status).inc(n)
        self.batches.inc()
        self.last_batch.set(self._now())

    def sinks_took(self, batch_id: int, seconds: float) -> None:
        """Micro-batch `batch_id`'s sinks took `seconds`, its rows in hand."""
        self.sinks_seconds.observe(seconds)
        with self._lock:  # noted on foreachBatch's thread, said on the job's
            self._sinks_ms[batch_id] = round(seconds * 1000)
            while len(self._sinks_ms) > _SINKS_TIMES_KEPT:
                del self._sinks_ms[next(iter(self._sinks_ms))]

    def sinks_ms(self, batch_id: int) -> int | None:
        """What `sinks_took` noted of `batch_id` (once), or None."""
        with self._lock:
            return self._sinks_ms.pop(batch_id, None)

    def placed(self, cluster: str, figures: dict[str, int]) -> None:
        """A turn's placing figures of one cluster (alert_job.order_row)."""
        for outcome, name in (
            ("gap", "gaps"), ("unproven", "unproven"), ("unplaced", "unplaced"),
            ("duplicate", "duplicates"),
        ):  # fmt: skip
            if figures.get(name):
                self.order.labels(cluster, outcome).inc(figures[name])
        self.waiting.labels(cluster).set(figures.get("waiting", 0))

    def started(self, running: bool) -> None:
        with self._lock:
            first = running and not self._started and self.batches._value.get() == 0
            self._started = running
        if first:
            self.last_batch.set(self._now())  # "no batch for N s" counts from the start
        self.running.set(1 if running else 0)

    def warming_up(self, warming: bool) -> None:
        """The job runs its warm-up (warm_up.py) before its own query: not ready yet."""
        with self._lock:
            self._warming_up = warming

    def catching_up(self, records_behind: int | None) -> None:
        """The job catches up (catch_up.py), this many records behind; None: its alerts are
        live. Said by `/healthz`, whose answer stays 200: a job catching up does its work, and
        a probe that took it for unwell would restart it into a longer catch-up."""
        with self._lock:
            self._catching_up = records_behind

    def health(self) -> tuple[bool, str]:
        with self._lock:
            started, warming, behind = self._started, self._warming_up, self._catching_up
        if started and behind is not None:
            return True, f"running, catching up: {behind:,} records behind"
        if started:
            return True, "running"
        return False, "warming up" if warming else "starting (Spark)"
