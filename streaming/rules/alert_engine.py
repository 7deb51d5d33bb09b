"""One cluster's alerting, record by record: state, rules and timers over event time.

Feed it the cluster's change records in `seq` order (dicts in the contract's field names, as
Avro decodes them); it returns the alerts each record causes. Time is the records' own `ts_ms`
(heartbeats keep it moving), so the same records give the same alerts at any replay speed. The
whole engine pickles, which is how the Spark job keeps it in its state store."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from zkcdc.streaming.rules import alert_rules
from zkcdc.streaming.rules.alert_records import Alert
from zkcdc.streaming.rules.alert_tracker import AlertTracker
from zkcdc.streaming.rules.cluster_state import ClusterState, Entity
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.rules.state_records import StateUpsert, upserts

_LIVE = {"CREATE", "UPDATE", "DELETE"}


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

    def __post_init__(self) -> None:
        self.state = ClusterState(self.cluster)
        self.tracker = AlertTracker(self.cluster)

    def process(self, record: dict[str, Any]) -> list[Alert]:
        if record["seq"] <= self.last_seq:
            return []  # seen already (a replayed batch after a restart): no alert twice
        self.last_seq = record["seq"]
        out = self.advance(record["ts_ms"])
        live = record["op"] in _LIVE
        touched: set[Entity] = set()
        window_keys: list[alert_rules.WindowKey] = []
        # Under a KRaft controller (a migration) states carry its epoch: the one to compare.
        kraft_epoch = getattr(self.state, "kraft_controller_epoch", None)  # older pickled states
        epoch = kraft_epoch if kraft_epoch is not None else self.state.controller_epoch
        before = (epoch, self.state.last_controller)
        for event in record["events"] or ():
            touched |= self.state.apply(event)
            if live:
                out += alert_rules.instants(event, before, self.tracker, self.settings, self.now_ms)
                window_keys += alert_rules.count(
                    event, self.windows, self.now_ms, self.window_expiries, self.settings
                )
            if event["type"] == "CONTROLLER_ELECTED":
                self.state.last_controller = event["broker_id"]
        self.changed |= touched
        out += alert_rules.evaluate(touched, self.state, self.tracker, self.settings, self.now_ms)
        out += alert_rules.evaluate_windows(
            window_keys, self.windows, self.tracker, self.settings, self.now_ms
        )
        return out

    def take_state(self) -> list[StateUpsert]:
        """Upserts for the state topic: every entity changed since the last call."""
        out = upserts(self.state, self.changed, self.now_ms)
        self.changed = set()
        return out

    def advance(self, ts_ms: int) -> list[Alert]:
        """Event time moves to `ts_ms` (never back): due timers fire, windows slide."""
        if ts_ms <= self.now_ms:
            return []
        self.now_ms = ts_ms
        out = self.tracker.tick(ts_ms)
        leaving = alert_rules.expired(self.window_expiries, ts_ms)
        out += alert_rules.evaluate_windows(
            sorted(leaving), self.windows, self.tracker, self.settings, ts_ms
        )
        return out
