"""Every alert rule's threshold, with its documented default (CONTRACT.md section 3).

For-durations are event time (ZooKeeper time, advanced by capture's heartbeats); none is
longer than 30 s by default. Instant rules (an election, a regression) fire on the change and
resolve `instant_hold_ms` later, so a consumer of the alert stream sees both ends."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from zkcdc.streaming.errors import StreamingError


@dataclass(frozen=True)
class RuleSettings:
    under_replicated_for_ms: int = 10_000
    under_min_isr_for_ms: int = 5_000
    default_min_insync_replicas: int = 1  # Kafka's broker default for min.insync.replicas
    offline_partition_for_ms: int = 0
    isr_flapping_changes: int = 4  # ISR shrinks + expands of one partition ...
    isr_flapping_window_ms: int = 60_000  # ... within this window
    leader_election_storm_changes: int = 50  # leader changes across the cluster ...
    leader_election_storm_window_ms: int = 60_000
    controller_flapping_changes: int = 3  # controller elections ...
    controller_flapping_window_ms: int = 120_000
    no_active_controller_for_ms: int = 10_000
    broker_down_for_ms: int = 5_000
    broker_flapping_changes: int = 4  # registrations + deregistrations of one broker ...
    broker_flapping_window_ms: int = 120_000
    preferred_leader_imbalance_ratio: float = 0.10  # Kafka's leader.imbalance.per.broker.percentage
    preferred_leader_imbalance_for_ms: int = 30_000
    reassignment_stuck_for_ms: int = 30_000
    topic_deletion_stuck_for_ms: int = 30_000
    consumer_partition_unowned_for_ms: int = 10_000
    consumer_idle_for_ms: int = 30_000
    consumer_owner_mismatch_for_ms: int = 30_000
    instant_hold_ms: int = 60_000  # how long an instant alert stays FIRING before RESOLVED

    def with_overrides(self, overrides: Mapping[str, str]) -> RuleSettings:
        """`{"under_replicated_for_ms": "2000"}` -> a copy with those values; unknown names and
        bad numbers are one-line errors."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        changes: dict[str, int | float] = {}
        for name, text in overrides.items():
            key = name.replace(".", "_").replace("-", "_")
            if key not in fields:
                raise StreamingError(f"unknown rule setting {name!r}")
            try:
                value = float(text) if fields[key].type == "float" else int(text)
            except ValueError as exc:
                raise StreamingError(f"rule setting {name!r} needs a number, got {text!r}") from exc
            if value < 0:
                raise StreamingError(f"rule setting {name!r} must not be negative")
            changes[key] = value
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
