"""What `zkcdc ui` holds: newest state per key, alerts merged, rows per entity, changes since
a version (or a whole snapshot for a client too far behind)."""

from __future__ import annotations

from typing import Any

from zkcdc.view import live_model
from zkcdc.view.alerts_tail import AlertFilter, alert_line, parse
from zkcdc.view.event_rows import describe, rows
from zkcdc.view.group_assignment import expected_owners
from zkcdc.view.live_model import LiveModel


def _alert(status: str, **more: Any) -> dict[str, Any]:
    return {"alert_id": "c:broker_down:broker/2:5", "rule": "broker_down", "severity": "critical",
            "status": status, "cluster": "c", "entity": "broker/2", "started_ms": 5,
            "ended_ms": 9 if status == "RESOLVED" else None, "summary": "down", "details": {},
            **more}  # fmt: skip


def test_changes_since_a_version_hold_only_what_changed_after_it() -> None:
    model = LiveModel()
    model.put_state("c/broker/1", {"kind": "broker", "broker_id": 1, "alive": True})
    seen = model.version
    model.put_state("c/broker/2", {"kind": "broker", "broker_id": 2, "alive": False})
    model.put_state("c/broker/1", None)
    changes = model.changes_since(seen)
    assert changes is not None
    assert sorted(changes["state"], key=str) == sorted(
        [["c/broker/1", None], ["c/broker/2", {"kind": "broker", "broker_id": 2, "alive": False}]],
        key=str,
    )
    assert model.changes_since(model.version)["state"] == []  # type: ignore[index]


def test_a_client_too_far_behind_is_told_to_take_a_snapshot(monkeypatch: Any) -> None:
    monkeypatch.setattr(live_model, "JOURNAL_MAX", 10)
    model = LiveModel()
    for n in range(30):
        model.put_state(f"c/topic/t{n}", {"kind": "topic", "topic": f"t{n}"})
    assert model.changes_since(0) is None
    assert len(model.snapshot()["state"]) == 30


def test_a_resolved_alert_stays_resolved_whatever_order_its_records_come_in() -> None:
    model = LiveModel()
    model.put_alert(_alert("FIRING"))
    model.put_alert(_alert("RESOLVED"))
    model.put_alert(_alert("FIRING"))
    (alert,) = model.snapshot()["alerts"]
    assert alert["status"] == "RESOLVED" and alert["ended_ms"] == 9


def test_every_firing_alert_is_kept_and_past_the_limit_the_first_resolved_are_let_go(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(live_model, "ALERTS_KEPT", 5)
    model = LiveModel()
    for n in range(8):
        model.put_alert(_alert("FIRING", alert_id=f"old{n}", started_ms=n))
    for n in range(8):
        model.put_alert(_alert("RESOLVED", alert_id=f"old{n}", started_ms=n, ended_ms=100 + n))
    model.put_alert(_alert("RESOLVED", alert_id="old0", started_ms=0, ended_ms=100))  # again
    for n in range(12):  # a storm: more firing at once than the limit
        model.put_alert(_alert("FIRING", alert_id=f"new{n}", started_ms=200 + n))
    kept = {a["alert_id"]: a["status"] for a in model.snapshot()["alerts"]}
    assert {k for k, s in kept.items() if s == "FIRING"} == {f"new{n}" for n in range(12)}
    assert {k for k, s in kept.items() if s == "RESOLVED"} == {f"old{n}" for n in range(3, 8)}
    seen = model.version
    model.put_alert(_alert("RESOLVED", alert_id="new0", started_ms=200, ended_ms=300))
    (told,) = model.changes_since(seen)["alerts"]  # type: ignore[index]
    assert told["alert_id"] == "new0" and told["status"] == "RESOLVED"
    kept = {a["alert_id"] for a in model.snapshot()["alerts"] if a["status"] == "RESOLVED"}
    assert kept == {"old4", "old5", "old6", "old7", "new0"}


def _record(op: str, events: list[dict[str, Any]], seq: int = 1) -> dict[str, Any]:
    return {"cluster": "c", "seq": seq, "ts_ms": 100 + seq, "path": "/p", "op": op,
            "events": events}  # fmt: skip


def test_rows_tell_an_isr_shrink_and_serve_the_partition_and_its_brokers() -> None:
    shrink = {"type": "ISR_SHRUNK", "topic": "t", "partition": 0, "isr_before": [1, 2, 3],
              "isr_after": [1, 2], "removed": [3]}  # fmt: skip
    assert rows(_record("READ", [shrink])) == []  # a snapshot is state, not news
    (row,) = rows(_record("UPDATE", [shrink]))
    assert row["entity"] == "t/0"
    assert describe(shrink) == "ISR_SHRUNK t/0 isr [1,2,3] → [1,2] removed [3]"
    model = LiveModel()
    model.put_rows([row])
    model.put_rows(rows(_record("UPDATE", [{"type": "BROKER_FENCED", "broker_id": 3}], seq=2)))
    assert [r["seq"] for r in model.rows_of("c", "t/0")] == [1]
    assert [r["seq"] for r in model.rows_of("c", "broker/3")] == [2]
    assert model.rows_of("c", "t/0", until_ms=100) == []
    assert model.snapshot()["fenced"] == {"c": [3]}


def test_a_group_is_shown_beside_the_range_rebalance_of_its_subscriptions() -> None:
    group = {"members": {"a": {"t": 1}, "b": {"t": 2}}, "owners": {}}
    assert expected_owners(group, lambda topic: 4) == {
        "t/0": "a-0", "t/1": "a-0", "t/2": "b-0", "t/3": "b-1"}  # fmt: skip


def test_alerts_tail_filters_by_cluster_rule_status_and_event_time() -> None:
    firing, resolved = _alert("FIRING"), _alert("RESOLVED")
    assert AlertFilter()(firing)
    assert not AlertFilter(clusters=frozenset({"other"}))(firing)
    assert not AlertFilter(rules=frozenset({"under_replicated"}))(firing)
    assert AlertFilter(statuses=frozenset({"RESOLVED"}))(resolved)
    assert not AlertFilter(statuses=frozenset({"RESOLVED"}))(firing)
    assert not AlertFilter(since_ms=6)(firing) and AlertFilter(since_ms=6)(resolved)
    assert parse(b"not json") is None and parse(b"[1]") is None
    line = alert_line(firing)
    assert "FIRING" in line.plain and "broker/2" in line.plain
    assert any("red" in str(span.style) for span in line.spans)
