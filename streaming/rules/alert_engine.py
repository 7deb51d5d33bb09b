"""One cluster's alerting, record by record: state, rules and timers over event time.

Feed it the cluster's change records in `seq` order (dicts in the contract's field names, as
Avro decodes them); it returns the alerts each record causes. Time is the records' own `ts_ms`
(heartbeats keep it moving), so the same records give the same alerts at any replay speed. The
Spark job keeps it between micro-batches as data (streaming/rules/engine_record.py)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from zkcdc.ground.change_types import Op
from zkcdc.streaming.rules import alert_rules
from zkcdc.streaming.rules.alert_records import Alert
from zkcdc.streaming.rules.alert_tracker import AlertTracker
from zkcdc.streaming.rules.cluster_state import ClusterState, Entity, leader_after
from zkcdc.streaming.rules.engine_scope import ISR_CHANGES, Scope
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.state_records import StateUpsert, upserts

_LIVE = {Op.CREATE, Op.UPDATE, Op.DELETE}
# An alert's place in the single engine's output: (seq, phase, ...) with phases 0 timers,
# 1 windows left behind, 2 instants, 3 level rules, 4 windows counted.
Order = tuple[Any, ...]


@dataclass
class AlertEngine:
    cluster: str
    settings: RuleSettings = field(default_factory=RuleSettings)
    state: ClusterState = field(init=False)
    tracker: AlertTracker = field(init=False)
    windows: dict[alert_rules.WindowKey, deque[int]] = field(default_factory=dict)
    window_expiries: alert_rules.Expiries = field(default_factory=dict)
    now_ms: int = 0
    last_seq: int = -1
    changed: set[Entity] = field(default_factory=set)  # since the last take_state()
    # None: the whole cluster; else the shard of it this engine runs (engine_scope.py).
    scope: Scope | None = None

    def __post_init__(self) -> None:
        self.state = ClusterState(self.cluster)
        self.tracker = AlertTracker(self.cluster)

    def process(self, record: dict[str, Any]) -> list[Alert]:
        return [alert for _, alert in self.process_ordered(record)]

    def process_ordered(self, record: dict[str, Any]) -> list[tuple[Order, Alert]]:
        """The alerts of `process`, each with its place in the single engine's output: shards
        of one cluster (`scope`) each give their part, and merged by place they are the
        single engine's alerts in its order."""
        seq = record["seq"]
        if seq <= self.last_seq:
            return []  # seen already (a replayed batch after a restart): no alert twice
        self.last_seq = seq
        out = self.advance_ordered(seq, record["ts_ms"])
        scope = self.scope
        live = record["op"] in _LIVE
        touched: set[Entity] = set()
        window_keys: list[tuple[int, alert_rules.WindowKey]] = []
        # Under a KRaft controller (a migration) states carry its epoch: the one to compare.
        kraft_epoch = self.state.kraft_controller_epoch
        epoch = kraft_epoch if kraft_epoch is not None else self.state.controller_epoch
        before = (epoch, self.state.last_controller)
        counts = None if scope is None else scope.counts
        for i, whole in enumerate(record["events"] or ()):
            event = whole if scope is None else scope.view(whole)
            if event is None or (scope is not None and scope.is_cluster and self._isr_only(event)):
                continue
            touched |= self.state.apply(event)
            if live:
                if scope is None or scope.raises_instants(event):
                    instants = alert_rules.instants(
                        event, before, self.tracker, self.settings, self.now_ms
                    )
                    if instants:
                        out += [((seq, 2, i, j), a) for j, a in enumerate(instants)]
                keys = alert_rules.count(
                    event, self.windows, self.now_ms, self.window_expiries, self.settings, counts
                )
                window_keys += [(i, key) for key in keys]
            self.state.settle(event)
        out += self._evaluate(seq, touched, scope)
        for i, key in window_keys:
            alerts = alert_rules.evaluate_windows(
                (key,), self.windows, self.tracker, self.settings, self.now_ms
            )
            if alerts:
                out += [((seq, 4, i, *key, j), a) for j, a in enumerate(alerts)]
        return out

    def process_leaders(
        self, seq: int, ts_ms: int, leaders: list[tuple[str, int, int | None]]
    ) -> list[tuple[Order, Alert]]:
        """A record of ISR and epoch changes only, as the cluster shard takes it (SQL gives it
        just each event's partition and leader: engine_scope.leader_moves): of such events
        the cluster shard keeps only the partition and its leader, for the preferred-leader
        counts; they raise no alert of its and count in none of its windows."""
        if seq <= self.last_seq:
            return []
        self.last_seq = seq
        out = self.advance_ordered(seq, ts_ms)
        touched: set[Entity] = set()
        for topic, partition, leader in leaders:
            if self.state.leader_stays((topic, partition), leader):
                # Most such records: the leader stays, and nothing the cluster shard keeps
                # moves (a write would only mark the partition's bucket to be written again).
                continue
            changes = {} if leader is None else {"leader": leader}
            touched |= self.state.change_partition((topic, partition), changes)
        return out + self._evaluate(seq, touched, self.scope)

    def _evaluate(
        self, seq: int, touched: set[Entity], scope: Scope | None
    ) -> list[tuple[Order, Alert]]:
        """The level rules of the entities a record touched (those this shard owns)."""
        if scope is not None:
            touched = {entity for entity in touched if scope.owns(entity)}
        self.changed |= touched
        # Each entity's rules read the state and hold only that entity's conditions, so the
        # order they run in changes nothing but the alerts' order: those that alert are put in
        # a stable order after (by kind, then id as text), not every entity before (a topic's
        # assignment touches each of its partitions, most of which raise nothing).
        raised: list[tuple[str, str, list[Alert]]] = []
        for entity in touched:
            alerts = alert_rules.evaluate(
                entity, self.state, self.tracker, self.settings, self.now_ms
            )
            if alerts:
                raised.append((entity[0], str(entity[1]), alerts))
        if len(raised) > 1:
            raised.sort(key=lambda r: (r[0], r[1]))
        return [((seq, 3, kind, ident, j), a) for kind, ident, alerts in raised
                for j, a in enumerate(alerts)]  # fmt: skip

    def take_state(self) -> list[StateUpsert]:
        """Upserts for the state topic: every entity changed since the last call."""
        out = upserts(self.state, self.changed, self.now_ms)
        self.changed = set()
        return out

    def forget_changes(self) -> list[StateUpsert]:
        """No state topic: the entities changed are not kept for one (they would grow with
        every entity the cluster has, saved with the engine each micro-batch)."""
        self.changed = set()
        return []

    def _isr_only(self, event: dict[str, Any]) -> bool:
        """An ISR or epoch change that keeps a known partition's leader: nothing the cluster
        shard keeps (replicas and leaders, for the preferred-leader counts) moves, so it skips
        it (most of a busy cluster's records)."""
        if event["type"] not in ISR_CHANGES:
            return False
        key = (event["topic"], event["partition"])
        return self.state.leader_stays(key, leader_after(event))

    def next_due(self) -> int:
        """The earliest event time at which a timer or a window may come due (or later: a
        timer that moved or went stays queued until then): before it, time passing does
        nothing but pass."""
        heads = [due[0][0] for due in self.window_expiries.values() if due]
        timer = self.tracker.next_due()
        return min(heads if timer is None else [*heads, timer], default=2**63)

    def advance(self, ts_ms: int) -> list[Alert]:
        """Event time moves to `ts_ms` (never back): due timers fire, windows slide."""
        return [alert for _, alert in self.advance_ordered(self.last_seq, ts_ms)]

    def advance_ordered(self, seq: int, ts_ms: int) -> list[tuple[Order, Alert]]:
        if ts_ms <= self.now_ms:
            return []
        self.now_ms = ts_ms
        timed = self.tracker.tick_timed(ts_ms)
        out: list[tuple[Order, Alert]] = (
            [((seq, 0, due, *key), alert) for due, key, alert in timed] if timed else []
        )
        left = alert_rules.expired(self.window_expiries, ts_ms)
        for key in sorted(left) if len(left) > 1 else left:
            alerts = alert_rules.evaluate_windows(
                (key,), self.windows, self.tracker, self.settings, ts_ms
            )
            if alerts:
                out += [((seq, 1, *key, j), a) for j, a in enumerate(alerts)]
        return out
