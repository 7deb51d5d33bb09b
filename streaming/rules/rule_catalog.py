"""Every alert rule, as a user meets it: id, severity, the entity it is about, how it decides,
and the settings (`RuleSettings` fields, `--rule NAME=VALUE`) that tune it. The reference's
rule page is generated from this, and the engine, the simulator's forecast and the alert
record's check take their ids and severities from here."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


class Decision(enum.StrEnum):
    # A condition of the live state, FIRING once it has held for the rule's for-duration
    # (event time), RESOLVED when it ends.
    CONDITION = "condition"
    # A count of changes of one entity within a sliding window of event time: FIRING when it
    # reaches the threshold, RESOLVED when it falls below.
    WINDOW = "window"
    # One change by itself (an election, a regression): FIRING on the change, RESOLVED
    # `instant_hold_ms` later.
    INSTANT = "instant"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    entity: str  # the alert's `entity`, as a pattern
    decision: Decision
    settings: tuple[str, ...]  # the RuleSettings fields that tune it
    fires_when: str


_C, _W, _I = Decision.CONDITION, Decision.WINDOW, Decision.INSTANT
_CRIT, _WARN, _INFO = Severity.CRITICAL, Severity.WARNING, Severity.INFO
_HOLD = ("instant_hold_ms",)

RULES: tuple[Rule, ...] = (
    Rule("under_replicated", _WARN, "TOPIC/PARTITION", _C, ("under_replicated_for_ms",),
         "an online partition has fewer in-sync replicas than replicas"),
    Rule("under_min_isr", _CRIT, "TOPIC/PARTITION", _C,
         ("under_min_isr_for_ms", "default_min_insync_replicas"),
         "an online partition has fewer in-sync replicas than its topic's "
         "min.insync.replicas (from /config/topics, else the default setting)"),
    Rule("offline_partition", _CRIT, "TOPIC/PARTITION", _C, ("offline_partition_for_ms",),
         "a partition's leader is -1"),
    Rule("isr_flapping", _WARN, "TOPIC/PARTITION", _W,
         ("isr_flapping_changes", "isr_flapping_window_ms"),
         "one partition's ISR shrinks and expands this many times within the window"),
    Rule("leader_election_storm", _WARN, "cluster", _W,
         ("leader_election_storm_changes", "leader_election_storm_window_ms"),
         "this many leader changes across the cluster within the window"),
    Rule("unclean_leader_election", _CRIT, "TOPIC/PARTITION", _I, _HOLD,
         "a partition's new leader was not in its ISR before the change"),
    Rule("controller_failover", _WARN, "controller", _I, _HOLD,
         "the controller moves from one broker to another"),
    Rule("controller_flapping", _CRIT, "controller", _W,
         ("controller_flapping_changes", "controller_flapping_window_ms"),
         "this many controller elections within the window"),
    Rule("no_active_controller", _CRIT, "controller", _C, ("no_active_controller_for_ms",),
         "brokers are registered but no broker holds /controller"),
    Rule("controller_epoch_regression", _CRIT, "controller or TOPIC/PARTITION", _I, _HOLD,
         "/controller_epoch goes back, or a partition state is written with an older "
         "controller epoch than the current one (a zombie controller)"),
    Rule("leader_epoch_regression", _CRIT, "TOPIC/PARTITION", _I, _HOLD,
         "a partition's leader epoch goes back"),
    Rule("broker_down", _CRIT, "broker/ID", _C, ("broker_down_for_ms",),
         "a broker that was registered is not"),
    Rule("broker_flapping", _WARN, "broker/ID", _W,
         ("broker_flapping_changes", "broker_flapping_window_ms"),
         "one broker registers and deregisters this many times within the window"),
    Rule("preferred_leader_imbalance", _WARN, "broker/ID", _C,
         ("preferred_leader_imbalance_ratio", "preferred_leader_imbalance_for_ms"),
         "a live broker does not lead more than this share of the partitions it is the "
         "preferred leader of (Kafka's leader.imbalance.per.broker.percentage)"),
    Rule("reassignment_stuck", _WARN, "TOPIC/PARTITION", _C, ("reassignment_stuck_for_ms",),
         "a partition's reassignment (adding or removing replicas, or "
         "/admin/reassign_partitions) has not completed"),
    Rule("topic_deletion_stuck", _WARN, "topic/TOPIC", _C, ("topic_deletion_stuck_for_ms",),
         "a topic's deletion (/admin/delete_topics) has not completed"),
    Rule("consumer_partition_unowned", _CRIT, "group/GROUP", _C,
         ("consumer_partition_unowned_for_ms",),
         "a legacy consumer group with members leaves a subscribed partition without owner"),
    Rule("consumer_idle", _INFO, "group/GROUP", _C, ("consumer_idle_for_ms",),
         "a legacy consumer group has members that the range assignment gives no partition"),
    Rule("consumer_owner_mismatch", _WARN, "group/GROUP", _C,
         ("consumer_owner_mismatch_for_ms",),
         "a legacy consumer group's partitions are owned against its range assignment"),
    Rule("offset_regression", _WARN, "group/GROUP", _I, _HOLD,
         "a legacy consumer group's committed offset goes back"),
    Rule("log_dir_failure", _CRIT, "broker/ID", _I, _HOLD,
         "a broker reports a failed log directory (/log_dir_event_notification)"),
)  # fmt: skip

RULE_IDS = frozenset(rule.id for rule in RULES)
# Plain strings, as alert records carry them.
SEVERITY: dict[str, str] = {rule.id: rule.severity.value for rule in RULES}
