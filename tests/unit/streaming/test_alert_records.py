"""The alert record as the sinks write it."""

from __future__ import annotations

import dataclasses
import json

from zkcdc.streaming.rules.alert_records import Alert


def alert(ended_ms: int | None) -> Alert:
    return Alert("c:under_replicated:t/0:5", "under_replicated", "warning",
                 "FIRING" if ended_ms is None else "RESOLVED", "c", "t/0", 5, ended_ms,
                 "t/0 has 2 of 3 replicas in sync", {"isr": "1,2"})  # fmt: skip


def test_an_alerts_json_has_every_field_of_the_record_with_keys_sorted():
    firing = alert(None)
    text = firing.as_text()
    assert json.loads(text) == dataclasses.asdict(firing)
    assert list(json.loads(text)) == sorted(f.name for f in dataclasses.fields(Alert))


def test_an_alert_happens_at_its_start_when_firing_and_at_its_end_when_resolved():
    assert alert(None).at_ms == 5
    assert alert(9).at_ms == 9
