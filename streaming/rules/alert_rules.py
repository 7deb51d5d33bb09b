"""The alert rules (docs/reference/rules.md) as pure functions of the cluster state and events.

Three kinds:
- level rules, re-evaluated for the entities a record touched (a partition under-replicated);
- instant rules, on one live event (an unclean election);
- window rules, counting live events per entity over an event-time window (ISR flapping)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from zkcdc.ground.change_types import EventType
from zkcdc.streaming.rules.alert_records import Alert
from zkcdc.streaming.rules.alert_tracker import AlertTracker
from zkcdc.streaming.rules.cluster_state import ClusterState, Entity, Group, Partition, PartitionKey
from zkcdc.streaming.rules.range_assignment import assign, thread_ids
from zkcdc.streaming.rules.rule_catalog import SEVERITY
from zkcdc.streaming.rules.rule_settings import RuleSettings


def _name(key: PartitionKey) -> str:
    return f"{key[0]}/{key[1]}"


def _ints(values: Iterable[int]) -> str:
    return ",".join(map(str, values))


# -- level rules ----------------------------------------------------------------------------------
def evaluate(
    entity: Entity, state: ClusterState, tracker: AlertTracker, settings: RuleSettings, now: int
) -> list[Alert]:
    """One entity's level rules. The engine runs them for each entity a record touched, and
    puts their alerts in a stable order (AlertEngine._evaluate)."""
    kind, ident = entity
    if kind == "partition":
        return _partition(ident, state, tracker, settings, now)
    if kind == "broker":
        return _broker(ident, state, tracker, settings, now)
    if kind == "controller":
        return _controller(state, tracker, settings, now)
    if kind == "topic":
        return _topic(ident, state, tracker, settings, now)
    if kind == "group":
        return _group(ident, state, tracker, settings, now)
    return []


def _partition(
    key: PartitionKey, state: ClusterState, tracker: AlertTracker, s: RuleSettings, now: int
) -> list[Alert]:
    p = state.partitions.get(key)
    known = p is not None and p.leader is not None
    in_flight = (p is not None and bool(p.adding or p.removing)) or key in state.reassignments
    held = tracker.conditions
    if not (known or in_flight or held):
        # No leader known yet, nothing moving and nothing held: no rule can hold or have held.
        # Most of a new job's evaluations (a snapshot names every partition in its topic's
        # assignment and config before it gives the partition's state).
        return []
    name = _name(key)
    online = known and p is not None and p.leader != -1
    isr = len(p.isr) if p else 0
    rf = p.replication_factor if p else 0
    min_isr = state.min_insync(key[0], s.default_min_insync_replicas)
    out: list[Alert] = []
    # Only conditions that hold or held need the tracker: the others are the common case, so
    # the four rules are written out rather than looped over (this runs at every state change).
    active = online and isr < rf
    if active or ("under_replicated", name) in held:
        out += tracker.hold("under_replicated", name, active, now, "warning",
                            partial(_partition_text, "under_replicated", name, p, isr, rf, min_isr),
                            s.under_replicated_for_ms)  # fmt: skip
    active = online and isr < min_isr
    if active or ("under_min_isr", name) in held:
        out += tracker.hold("under_min_isr", name, active, now, "critical",
                            partial(_partition_text, "under_min_isr", name, p, isr, rf, min_isr),
                            s.under_min_isr_for_ms)  # fmt: skip
    active = known and not online
    if active or ("offline_partition", name) in held:
        out += tracker.hold("offline_partition", name, active, now, "critical",
                            partial(_partition_text, "offline_partition", name, p, isr, rf,
                                    min_isr), s.offline_partition_for_ms)  # fmt: skip
    if in_flight or ("reassignment_stuck", name) in held:
        out += tracker.hold("reassignment_stuck", name, in_flight, now, "warning",
                            partial(_partition_text, "reassignment_stuck", name, p, isr, rf,
                                    min_isr), s.reassignment_stuck_for_ms)  # fmt: skip
    return out


def _partition_text(
    rule: str, name: str, p: Partition | None, isr: int, rf: int, min_isr: int
) -> tuple[str, dict[str, str]]:
    details = (
        {"isr": _ints(p.isr), "replicas": _ints(p.replicas), "leader": str(p.leader)} if p else {}
    )
    # Only the rule's own summary is formatted: this runs at every change of a held condition.
    if rule == "under_replicated":
        return f"{name} has {isr} of {rf} replicas in sync", details
    if rule == "under_min_isr":
        summary = f"{name} has {isr} in-sync replicas, below min.insync.replicas {min_isr}"
        return summary, details
    if rule == "offline_partition":
        return f"{name} has no leader", details
    return f"reassignment of {name} has not completed", details


def _broker(
    broker: int, state: ClusterState, tracker: AlertTracker, s: RuleSettings, now: int
) -> list[Alert]:
    b = state.brokers.get(broker)
    entity = f"broker/{broker}"
    preferred, not_led = state.preferred[broker], state.not_led[broker]
    ratio = not_led / preferred if preferred else 0.0
    imbalanced = b is not None and b.alive and ratio > s.preferred_leader_imbalance_ratio
    return [
        *tracker.hold("broker_down", entity, b is not None and not b.alive, now, "critical",
                      lambda: (f"broker {broker} is not registered", {}), s.broker_down_for_ms),
        *tracker.hold("preferred_leader_imbalance", entity, imbalanced, now, "warning",
                      lambda: (f"broker {broker} leads {preferred - not_led} of the {preferred} "
                               f"partitions it is preferred for",
                               {"ratio": f"{ratio:.3f}", "not_led": str(not_led)}),
                      s.preferred_leader_imbalance_for_ms),
    ]  # fmt: skip


def _controller(
    state: ClusterState, tracker: AlertTracker, s: RuleSettings, now: int
) -> list[Alert]:
    alive = any(b.alive for b in state.brokers.values())
    return tracker.hold(
        "no_active_controller", "controller", alive and state.controller is None, now,
        "critical", lambda: ("no broker holds /controller", {}), s.no_active_controller_for_ms,
    )  # fmt: skip


def _topic(
    topic: str, state: ClusterState, tracker: AlertTracker, s: RuleSettings, now: int
) -> list[Alert]:
    return tracker.hold(
        "topic_deletion_stuck", f"topic/{topic}", topic in state.deletions, now, "warning",
        lambda: (f"deletion of topic {topic} has not completed", {}),
        s.topic_deletion_stuck_for_ms,
    )  # fmt: skip


def expected_owners(group: Group, state: ClusterState) -> tuple[dict[PartitionKey, str], set[str]]:
    """The seeds' range assignment for every subscribed topic: partition -> thread, and the
    consumers that get nothing at all."""
    expected: dict[PartitionKey, str] = {}
    busy: set[str] = set()
    for topic in sorted({t for sub in group.members.values() for t in sub}):
        threads = thread_ids({c: sub[topic] for c, sub in group.members.items() if topic in sub})
        for thread, owned in assign(state.topics.get(topic, ()), threads).items():
            for partition in owned:
                expected[(topic, partition)] = thread
                busy.add(thread.rsplit("-", 1)[0])
    return expected, set(group.members) - busy


def _group(
    name: str, state: ClusterState, tracker: AlertTracker, s: RuleSettings, now: int
) -> list[Alert]:
    group = state.groups.get(name)
    entity = f"group/{name}"
    members = bool(group and group.members)
    expected, idle = expected_owners(group, state) if group and members else ({}, set())
    owners = group.owners if group else {}
    unowned = sorted(k for k in expected if k not in owners)
    mismatched = sorted(k for k, t in owners.items() if k in expected and expected[k] != t)
    return [
        *tracker.hold("consumer_partition_unowned", entity, bool(unowned), now, "critical",
                      lambda: (f"group {name} leaves {len(unowned)} partitions unowned",
                               {"partitions": ",".join(_name(k) for k in unowned[:20])}),
                      s.consumer_partition_unowned_for_ms),
        *tracker.hold("consumer_idle", entity, bool(idle), now, "info",
                      lambda: (f"group {name} has {len(idle)} consumers with no partition",
                               {"consumers": ",".join(sorted(idle)[:20])}),
                      s.consumer_idle_for_ms),
        *tracker.hold("consumer_owner_mismatch", entity, bool(mismatched), now, "warning",
                      lambda: (f"group {name}: {len(mismatched)} partitions owned against the "
                               f"range assignment",
                               {"partitions": ",".join(_name(k) for k in mismatched[:20])}),
                      s.consumer_owner_mismatch_for_ms),
    ]  # fmt: skip


# -- instant rules --------------------------------------------------------------------------------
def instants(
    event: dict[str, Any],
    state_before: tuple[int | None, int | None],
    tracker: AlertTracker,
    s: RuleSettings,
    now: int,
) -> list[Alert]:
    """Alerts one live event raises by itself. `state_before` = (controller epoch, last
    controller) as they were before the event's record."""
    kind = event["type"]
    get = event.get
    epoch, last_controller = state_before
    fire = partial(_fire, tracker, now, s.instant_hold_ms)
    out: list[Alert] = []
    if kind == EventType.LEADER_CHANGED and get("clean") is False:
        name = _event_partition(event)
        out += fire("unclean_leader_election", name, "critical",
                    f"{name}: broker {get('leader_after')} became leader out of sync",
                    leader_before=get("leader_before"), leader_after=get("leader_after"))  # fmt: skip
    before, after = get("leader_epoch_before"), get("leader_epoch_after")
    if before is not None and after is not None and after < before:
        name = _event_partition(event)
        out += fire("leader_epoch_regression", name, "critical",
                    f"{name}: leader epoch went back from {before} to {after}",
                    leader_epoch_before=before, leader_epoch_after=after)  # fmt: skip
    written = get("controller_epoch")
    if kind in _STATE_WRITES and written is not None and epoch is not None and written < epoch:
        name = _event_partition(event)
        out += fire("controller_epoch_regression", name, "critical",
                    f"{name} written with controller epoch {written}, current is {epoch}",
                    written_epoch=written, controller_epoch=epoch)  # fmt: skip
    if kind == EventType.CONTROLLER_EPOCH_CHANGED:
        old, new = get("epoch_before"), get("epoch_after")
        if old is not None and new is not None and new < old:
            out += fire("controller_epoch_regression", "controller", "critical",
                        f"/controller_epoch went back from {old} to {new}")  # fmt: skip
    if kind == EventType.CONTROLLER_ELECTED:
        previous = get("broker_id_before")
        previous = previous if previous is not None else last_controller
        if previous is not None:
            out += fire("controller_failover", "controller", "warning",
                        f"controller moved from broker {previous} to {event['broker_id']}",
                        broker_before=previous, broker_after=event["broker_id"])  # fmt: skip
    if kind == EventType.OFFSET_COMMITTED:
        old, new = get("offset_before"), get("offset_after")
        if old is not None and new is not None and new < old:
            topic, partition = get("topic"), get("partition")
            out += fire("offset_regression", f"group/{event['group']}", "warning",
                        f"group {event['group']} moved {_event_partition(event)} back from "
                        f"{old} to {new}",
                        topic=topic, partition=partition, offset_before=old, offset_after=new)  # fmt: skip
    if kind == EventType.LOG_DIR_FAILED:
        broker = get("broker_id")
        out += fire("log_dir_failure", f"broker/{broker}", "critical",
                    f"a log directory of broker {broker} failed")  # fmt: skip
    return out


def _event_partition(event: dict[str, Any]) -> str:
    """The partition an event names, as alerts name it (asked for only when one fires)."""
    return f"{event.get('topic')}/{event.get('partition')}"


def _fire(
    tracker: AlertTracker, now: int, hold: int, rule: str, entity: str, severity: str,
    summary: str, **details: Any,
) -> list[Alert]:  # fmt: skip
    text = {k: str(v) for k, v in details.items() if v is not None}
    return tracker.instant(rule, entity, now, severity, summary, text, hold)


_STATE_WRITES = {
    EventType.LEADER_CHANGED,
    EventType.LEADER_EPOCH_BUMPED,
    EventType.ISR_SHRUNK,
    EventType.ISR_EXPANDED,
    EventType.PARTITION_STATE_REWRITTEN,
}


# -- window rules ---------------------------------------------------------------------------------
WindowKey = tuple[str, str]  # (rule, entity)

# event type -> the window rules it counts for, each with the entity it counts against
_WINDOWED: dict[str, list[tuple[str, Callable[[dict[str, Any]], str]]]] = {
    EventType.ISR_SHRUNK: [("isr_flapping", lambda e: f"{e['topic']}/{e['partition']}")],
    EventType.ISR_EXPANDED: [("isr_flapping", lambda e: f"{e['topic']}/{e['partition']}")],
    EventType.LEADER_CHANGED: [("leader_election_storm", lambda e: "cluster")],
    EventType.CONTROLLER_ELECTED: [("controller_flapping", lambda e: "controller")],
    EventType.BROKER_REGISTERED: [("broker_flapping", lambda e: f"broker/{e['broker_id']}")],
    EventType.BROKER_DEREGISTERED: [("broker_flapping", lambda e: f"broker/{e['broker_id']}")],
}


def _window_text(rule: str, entity: str, n: int, window_ms: int) -> tuple[str, dict[str, str]]:
    return (
        f"{entity}: {n} changes of {rule.replace('_', ' ')} within {window_ms // 1000} s",
        {"changes": str(n), "window_ms": str(window_ms)},
    )


_WINDOWS: dict[tuple[str, int], tuple[RuleSettings, tuple[int, int]]] = {}


def _window(rule: str, s: RuleSettings) -> tuple[int, int]:
    # Looked up for every windowed event: cached by the settings' identity (hashing the
    # settings would cost more than the lookups); the entry keeps them alive, so ids stay theirs.
    hit = _WINDOWS.get((rule, id(s)))
    if hit is None or hit[0] is not s:
        hit = (s, (getattr(s, f"{rule}_changes"), getattr(s, f"{rule}_window_ms")))
        _WINDOWS[(rule, id(s))] = hit
    return hit[1]


# When counted events leave their windows, per rule, in due order: a rule has one window
# length and event time never goes back, so a queue keeps them sorted (a heap over all rules
# was ~7 % of a storm replay's engine time).
Expiries = dict[str, deque[tuple[int, WindowKey]]]


def count(
    event: dict[str, Any],
    windows: dict[WindowKey, deque[int]],
    now: int,
    expiries: Expiries,
    s: RuleSettings,
    counts: Callable[[str], bool] | None = None,
) -> list[WindowKey]:
    """Counts one live event into the windows it belongs to (of the rules `counts` takes, if
    given); the keys it changed. `expiries` learns when the event leaves its window, so only
    those windows are re-checked as time passes."""
    keys = []
    for rule, entity_of in _WINDOWED.get(event["type"], ()):
        if counts is not None and not counts(rule):
            continue
        key = (rule, entity_of(event))
        # get before setdefault: setdefault would build a deque each call to throw it away.
        times = windows.get(key)
        if times is None:
            times = windows[key] = deque()
        times.append(now)
        keys.append(key)
        due = expiries.get(rule)
        if due is None:
            due = expiries[rule] = deque()
        due.append((now + _window(rule, s)[1], key))
    return keys


def expired(expiries: Expiries, now: int) -> set[WindowKey]:
    """The windows an event has left by `now`."""
    keys = set()
    for due in expiries.values():
        while due and due[0][0] <= now:
            keys.add(due.popleft()[1])
    return keys


def evaluate_windows(
    keys: Iterable[WindowKey],
    windows: dict[WindowKey, deque[int]],
    tracker: AlertTracker,
    s: RuleSettings,
    now: int,
) -> list[Alert]:
    out: list[Alert] = []
    if not keys:
        return out
    for rule, entity in keys:
        times = windows.get((rule, entity))
        if times is None:
            continue
        threshold, window_ms = _window(rule, s)
        while times and times[0] <= now - window_ms:
            times.popleft()
        n = len(times)
        # As for partitions: a window below its threshold that never crossed it needs nothing.
        if n >= threshold or (rule, entity) in tracker.conditions:
            out += tracker.hold(
                rule, entity, n >= threshold, now, SEVERITY[rule],
                partial(_window_text, rule, entity, n, window_ms), 0,
            )  # fmt: skip
        if not times:
            del windows[(rule, entity)]
    return out
