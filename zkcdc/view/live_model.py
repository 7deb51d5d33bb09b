"""What `zkcdc ui` knows, rebuilt from Kafka at every start (it keeps nothing of its own): the
newest state per key (state topic), every alert's FIRING and RESOLVED (alerts topic), recent
event rows per entity (changes topic) and capture health (its metrics). Pure and
thread-safe: feeds put in, the web app takes snapshots and the changes since a version."""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from typing import Any

from zkcdc.ground.change_types import EventType
from zkcdc.ground.gc_pause import gc_paused
from zkcdc.view.event_rows import concerns
from zkcdc.view.group_assignment import with_expected

ROWS_PER_ENTITY = 50
RECENT_ROWS = 300
CONTROLLER_ROWS = 200
ALERTS_KEPT = 5_000
JOURNAL_MAX = 500_000  # past this a client that is behind gets a whole snapshot again


def _row_key(row: dict[str, Any]) -> str:
    return f"{row['cluster']}/{row['seq']}/{row['type']}"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class LiveModel:
    def __init__(self, now_ms: Callable[[], int] = wall_ms) -> None:
        self._lock = threading.Lock()
        self.version = 0
        self._state: dict[str, dict[str, Any]] = {}
        self._alerts: dict[str, dict[str, Any]] = {}  # alert_id -> merged FIRING/RESOLVED
        self._resolved: deque[str] = deque()  # resolved alert ids, in the order they resolved
        self._by_entity: dict[tuple[str, str], deque[dict[str, Any]]] = {}
        self._recent: deque[dict[str, Any]] = deque(maxlen=RECENT_ROWS)
        self._controller: dict[str, deque[dict[str, Any]]] = {}
        self._capture: dict[str, dict[str, Any]] = {}
        self._fenced: dict[str, set[int]] = {}  # KRaft: registered brokers the controller fenced
        # Keys and alerts per cluster, kept as they come: working the clusters out of 200,000
        # keys on every push took the ui a core's tenth in a broker failure (BENCHMARKS.md, B8).
        self._state_clusters: Counter[str] = Counter()
        self._alert_clusters: Counter[str] = Counter()
        self._journal_versions: list[int] = []
        self._journal: list[tuple[str, str]] = []  # (kind, key), one per version
        self._journal_start = 0
        self.loaded = {"state": False, "alerts": False, "changes": False}
        self.skipped = {"state": 0, "alerts": 0, "changes": 0}  # unreadable messages, per feed
        # Per feed: how far behind its topic the ui read, at its newest message (ms); 0 once
        # the feed has read all its topic holds (a quiet topic's last message is old news).
        self.read_lag_ms: dict[str, int] = {}
        self._now_ms = now_ms

    # -- fed ---------------------------------------------------------------------------------
    def put_state(self, key: str, value: dict[str, Any] | None) -> None:
        with self._lock:
            if value is None:
                if self._state.pop(key, None) is not None:
                    self._state_clusters[key.split("/", 1)[0]] -= 1
            else:
                if key not in self._state:
                    self._state_clusters[key.split("/", 1)[0]] += 1
                self._state[key] = value
            self._note("state", key)

    def put_alert(self, alert: dict[str, Any]) -> None:
        with self._lock:
            alert_id = str(alert["alert_id"])
            merged = {**self._alerts.get(alert_id, {}), **alert}
            if (
                alert.get("status") == "FIRING"
                and self._alerts.get(alert_id, {}).get("status") == "RESOLVED"
            ):
                merged = self._alerts[alert_id]  # a late FIRING never re-opens a resolved one
            was = self._alerts.get(alert_id, {}).get("status")
            if merged.get("status") == "RESOLVED" and was != "RESOLVED":
                if was is None and self._older_than_kept(merged):
                    return  # one let go already, told again (a sink's redelivery): stays gone
                self._resolved.append(alert_id)
            if alert_id not in self._alerts:
                self._alert_clusters[str(merged.get("cluster"))] += 1
            self._alerts[alert_id] = merged
            # Firing alerts are all kept, and the last ALERTS_KEPT resolved.
            while len(self._resolved) > ALERTS_KEPT:
                gone = self._alerts.pop(self._resolved.popleft(), None)
                if gone is not None:
                    self._alert_clusters[str(gone.get("cluster"))] -= 1
            self._note("alert", alert_id)

    def put_rows(self, rows: list[dict[str, Any]]) -> None:
        with self._lock:
            for row in rows:
                key = (row["cluster"], row["entity"])
                kept = self._by_entity.get(key)
                if kept is None:
                    kept = self._by_entity[key] = deque(maxlen=ROWS_PER_ENTITY)
                kept.append(row)
                self._recent.append(row)
                if row["type"] in (EventType.BROKER_FENCED, EventType.BROKER_UNFENCED):
                    fenced = self._fenced.setdefault(row["cluster"], set())
                    if row["type"] == EventType.BROKER_FENCED:
                        fenced.add(int(row["broker_id"]))
                    else:
                        fenced.discard(int(row["broker_id"]))
                if str(row["type"]).startswith("CONTROLLER"):
                    timeline = self._controller.setdefault(
                        row["cluster"], deque(maxlen=CONTROLLER_ROWS)
                    )
                    timeline.append(row)
                self._note("row", _row_key(row))

    def put_capture(self, url: str, health: dict[str, Any]) -> None:
        with self._lock:
            if self._capture.get(url) != health:
                self._capture[url] = health
                self._note("capture", url)

    def note_read(self, feed: str, topic_ms: int) -> None:
        """A feed took messages up to one its topic stamped `topic_ms`."""
        if topic_ms > 0:
            self.read_lag_ms[feed] = max(0, self._now_ms() - topic_ms)

    def note_at_end(self, feed: str) -> None:
        """A feed has read everything its topic holds: it is not behind, however old the
        topic's last message is."""
        if feed in self.read_lag_ms:
            self.read_lag_ms[feed] = 0

    def mark_loaded(self, feed: str) -> None:
        with self._lock:
            self.loaded[feed] = True
            self._note("loaded", feed)

    # -- taken -------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything, for a page that starts: partitions' views as `tables` (see `as_tables`),
        every other key as a `[key, value]` pair in `state`."""
        with self._lock, gc_paused():
            loose, tables = as_tables((k, self._shown(k, v)) for k, v in self._state.items())
            return {
                "version": self.version,
                "clusters": self._clusters(),
                "state": loose,
                "tables": tables,
                "alerts": list(self._alerts.values()),
                "recent": list(self._recent),
                "controller": {c: list(rows) for c, rows in self._controller.items()},
                "capture": self._capture_list(),
                "loaded": dict(self.loaded),
                "skipped": dict(self.skipped),
                "fenced": self._fenced_lists(),
            }

    def changes_since(self, version: int, most: int | None = None) -> dict[str, Any] | None:
        """What changed after `version`, or None when that is too old to say (take a snapshot).
        `most`: changes told at most, the version given being the last one told; the rest come
        with the next call (a page takes a storm in bites, not in one long task)."""
        with self._lock:
            if version < self._journal_start:
                return None
            at = bisect.bisect_right(self._journal_versions, version)
            end = len(self._journal) if most is None else min(len(self._journal), at + most)
            kinds: dict[str, set[str]] = {}
            for kind, key in self._journal[at:end]:
                kinds.setdefault(kind, set()).add(key)
            state = [[k, self._shown(k, self._state.get(k))] for k in kinds.get("state", ())]
            alerts = [self._alerts[a] for a in kinds.get("alert", ()) if a in self._alerts]
            told_rows = kinds.get("row", set())
            return {
                "version": self._journal_versions[end - 1] if end > at else self.version,
                "clusters": self._clusters() if state else None,
                "state": state,
                "alerts": alerts,
                "recent": [r for r in self._recent if _row_key(r) in told_rows] if told_rows else [],
                "controller": {c: list(r) for c, r in self._controller.items()} if told_rows else None,
                "capture": self._capture_list() if "capture" in kinds else None,
                "loaded": dict(self.loaded) if "loaded" in kinds else None,
                "fenced": self._fenced_lists() if told_rows else None,
            }  # fmt: skip

    def rows_of(
        self, cluster: str, entity: str, until_ms: int | None = None
    ) -> list[dict[str, Any]]:
        """The kept rows about `entity` (a partition's history; an alert's causes)."""
        with self._lock:
            if entity.startswith(("broker/", "topic/")) or entity == "controller":
                found = [
                    r for (c, _), kept in self._by_entity.items() if c == cluster
                    for r in kept if concerns(r, entity)
                ]  # fmt: skip
                found.sort(key=lambda r: (r["t"], r["seq"]))
            else:
                found = list(self._by_entity.get((cluster, entity), ()))
        return [r for r in found if until_ms is None or r["t"] <= until_ms]

    # -- inside ------------------------------------------------------------------------------
    def _note(self, kind: str, key: str) -> None:
        self.version += 1
        self._journal_versions.append(self.version)
        self._journal.append((kind, key))
        if len(self._journal) > JOURNAL_MAX:
            half = len(self._journal) // 2
            self._journal_start = self._journal_versions[half - 1]
            del self._journal[:half], self._journal_versions[:half]

    def _older_than_kept(self, resolved: dict[str, Any]) -> bool:
        """Whether a resolved alert ended before every one kept, with no room left."""
        if len(self._resolved) < ALERTS_KEPT:
            return False
        oldest = self._alerts[self._resolved[0]]
        return _ended(resolved) < _ended(oldest)

    def _clusters(self) -> list[str]:
        return sorted((self._state_clusters + self._alert_clusters).keys())

    def _shown(self, key: str, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None or value.get("kind") != "group":
            return value
        cluster = key.split("/", 1)[0]

        def partitions_of(topic: str) -> int:
            found = self._state.get(f"{cluster}/topic/{topic}") or {}
            return int(found.get("partitions") or 0)

        return with_expected(value, partitions_of)

    def _fenced_lists(self) -> dict[str, list[int]]:
        return {cluster: sorted(ids) for cluster, ids in self._fenced.items()}

    def _capture_list(self) -> list[dict[str, Any]]:
        return [{"url": url, **health} for url, health in sorted(self._capture.items())]


def as_tables(
    pairs: Iterable[tuple[str, dict[str, Any] | None]],
) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """Partitions' views as tables: their field names once, then a row per partition (its key,
    then its values in that order). Every other pair stays a `[key, value]`. A snapshot of
    200,000 partitions was 54 MB of JSON, half of it the same field names (BENCHMARKS.md, B8)."""
    loose: list[list[Any]] = []
    tables: dict[tuple[str, ...], list[list[Any]]] = {}
    for key, value in pairs:
        if value is None or value.get("kind") != "partition":
            loose.append([key, value])
            continue
        fields = tuple(value)
        rows = tables.get(fields)
        if rows is None:
            rows = tables[fields] = []
        rows.append([key, *value.values()])
    return loose, [{"fields": list(fields), "rows": rows} for fields, rows in tables.items()]


def _ended(alert: dict[str, Any]) -> int:
    return int(alert.get("ended_ms") or alert.get("started_ms") or 0)
