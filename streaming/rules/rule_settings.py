"""Every alert rule's threshold, with its documented default (docs/reference/rules.md).

For-durations are event time (ZooKeeper time, advanced by capture's heartbeats); none is
longer than 30 s by default. Instant rules (an election, a regression) fire on the change and
resolve `instant_hold_ms` later, so a consumer of the alert stream sees both ends."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, NonNegativeFloat, NonNegativeInt, ValidationError

from zkcdc.streaming.errors import StreamingError


class RuleSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    under_replicated_for_ms: NonNegativeInt = 10_000
    under_min_isr_for_ms: NonNegativeInt = 5_000
    default_min_insync_replicas: NonNegativeInt = (
        1  # Kafka's broker default for min.insync.replicas
    )
    offline_partition_for_ms: NonNegativeInt = 0
    isr_flapping_changes: NonNegativeInt = 4  # ISR shrinks + expands of one partition ...
    isr_flapping_window_ms: NonNegativeInt = 60_000  # ... within this window
    leader_election_storm_changes: NonNegativeInt = 50  # leader changes across the cluster ...
    leader_election_storm_window_ms: NonNegativeInt = 60_000
    controller_flapping_changes: NonNegativeInt = 3  # controller elections ...
    controller_flapping_window_ms: NonNegativeInt = 120_000
    no_active_controller_for_ms: NonNegativeInt = 10_000
    broker_down_for_ms: NonNegativeInt = 5_000
    broker_flapping_changes: NonNegativeInt = 4  # registrations + deregistrations of one broker ...
    broker_flapping_window_ms: NonNegativeInt = 120_000
    preferred_leader_imbalance_ratio: NonNegativeFloat = (
        0.10  # Kafka's leader.imbalance.per.broker.percentage
    )
    preferred_leader_imbalance_for_ms: NonNegativeInt = 30_000
    reassignment_stuck_for_ms: NonNegativeInt = 30_000
    topic_deletion_stuck_for_ms: NonNegativeInt = 30_000
    consumer_partition_unowned_for_ms: NonNegativeInt = 10_000
    consumer_idle_for_ms: NonNegativeInt = 30_000
    consumer_owner_mismatch_for_ms: NonNegativeInt = 30_000
    instant_hold_ms: NonNegativeInt = (
        60_000  # how long an instant alert stays FIRING before RESOLVED
    )

    def with_overrides(self, overrides: Mapping[str, str]) -> RuleSettings:
        """`{"under_replicated.for_ms": "2000"}` -> a copy with those values; unknown names and
        bad numbers are one-line errors."""
        spelt = {name.replace(".", "_").replace("-", "_"): name for name in overrides}
        given = {key: overrides[name] for key, name in spelt.items()}
        try:
            return RuleSettings.model_validate({**self.model_dump(), **given})
        except ValidationError as exc:
            error = exc.errors()[0]
            key = str(error["loc"][0])
            name, text = spelt.get(key, key), given.get(key)
            if error["type"] == "extra_forbidden":
                raise StreamingError(f"unknown rule setting {name!r}") from exc
            if error["type"].startswith("greater_than"):
                raise StreamingError(f"rule setting {name!r} must not be negative") from exc
            raise StreamingError(f"rule setting {name!r} needs a number, got {text!r}") from exc
