"""What `zkcdc ui` holds: newest state per key, alerts merged, rows per entity, changes since
a version (or a whole snapshot for a client too far behind)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zkcdc.ground.change_types import EventType
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
    shrink = {"type": EventType.ISR_SHRUNK, "topic": "t", "partition": 0, "isr_before": [1, 2, 3],
              "isr_after": [1, 2], "removed": [3]}  # fmt: skip
    assert rows(_record("READ", [shrink])) == []  # a snapshot is state, not news
    (row,) = rows(_record("UPDATE", [shrink]))
    assert row["entity"] == "t/0"
    assert describe(shrink) == "ISR_SHRUNK t/0 isr [1,2,3] → [1,2] removed [3]"
    model = LiveModel()
    model.put_rows([row])
    model.put_rows(
        rows(_record("UPDATE", [{"type": EventType.BROKER_FENCED, "broker_id": 3}], seq=2))
    )
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


def test_the_clusters_are_those_with_state_or_alerts_kept(monkeypatch: Any) -> None:
    monkeypatch.setattr(live_model, "ALERTS_KEPT", 1)
    model = LiveModel()
    model.put_state("a/broker/1", {"kind": "broker", "broker_id": 1})
    model.put_state("a/broker/1", {"kind": "broker", "broker_id": 1, "alive": True})
    model.put_state("b/broker/1", {"kind": "broker", "broker_id": 1})
    model.put_alert(_alert("FIRING", cluster="c"))
    assert model.snapshot()["clusters"] == ["a", "b", "c"]
    model.put_state("b/broker/1", None)
    model.put_state("b/broker/9", None)  # never there: nothing to take away
    model.put_alert(_alert("RESOLVED", cluster="c"))
    assert model.snapshot()["clusters"] == ["a", "c"]  # a resolved alert kept keeps its cluster
    model.put_alert(_alert("RESOLVED", alert_id="other", cluster="d"))
    assert model.snapshot()["clusters"] == ["a", "d"]  # c's let go: past ALERTS_KEPT resolved
    changes = model.changes_since(0)
    assert changes is not None and changes["clusters"] == ["a", "d"]


def test_a_snapshot_gives_partitions_as_tables_that_read_back_to_the_same_views() -> None:
    model = LiveModel()
    views = {
        "c/partition/t/0": {"kind": "partition", "topic": "t", "partition": 0, "isr": [1, 2]},
        "c/partition/t/1": {"kind": "partition", "topic": "t", "partition": 1, "isr": [2]},
        # another shape (an older schema's view): a table of its own
        "c/partition/u/0": {"kind": "partition", "topic": "u", "partition": 0},
        "c/topic/t": {"kind": "topic", "topic": "t", "partitions": 2},
    }
    for key, value in views.items():
        model.put_state(key, value)
    snapshot = model.snapshot()
    assert snapshot["state"] == [["c/topic/t", views["c/topic/t"]]]
    back = {
        row[0]: dict(zip(table["fields"], row[1:], strict=True))
        for table in snapshot["tables"]
        for row in table["rows"]
    }
    assert back == {k: v for k, v in views.items() if v["kind"] == "partition"}
    assert len(snapshot["tables"]) == 2


def test_each_feed_says_how_far_behind_its_topic_it_read_by_the_injected_clock() -> None:
    now = [10_000]
    model = LiveModel(now_ms=lambda: now[0])
    assert model.read_lag_ms == {}
    model.note_read("state", 9_250)
    now[0] = 20_000
    model.note_read("alerts", 20_400)  # a topic's clock ahead of ours: not behind
    model.note_read("changes", -1)  # a message without a time says nothing
    assert model.read_lag_ms == {"state": 750, "alerts": 0}


def test_a_feed_that_read_all_its_topic_holds_is_not_behind_however_old_its_last_message() -> None:
    now = [10_000]
    model = LiveModel(now_ms=lambda: now[0])
    model.note_at_end("state")  # nothing read yet: nothing to say
    assert model.read_lag_ms == {}
    model.note_read("state", 9_000)
    now[0] = 110_000  # the topic goes quiet; its newest message is 101 s old by now
    model.note_at_end("state")
    assert model.read_lag_ms == {"state": 0}
    model.note_read("state", 109_500)  # the next message is behind again by its own age
    assert model.read_lag_ms == {"state": 500}


def test_the_snapshot_is_built_once_per_version_and_its_gzip_reads_back_to_it() -> None:
    import gzip

    import orjson

    from zkcdc.view.web_app import SnapshotCache

    model = LiveModel()
    model.put_state("c/broker/1", {"kind": "broker", "broker_id": 1, "alive": True})
    cache = SnapshotCache(model)
    first = cache.body(gzipped=False)
    assert cache.body(gzipped=False) is first  # nothing changed: the same bytes
    assert cache.latest() == (model.version, first)  # what a page too far behind is sent
    assert gzip.decompress(cache.body(gzipped=True)) == first
    model.put_state("c/broker/1", {"kind": "broker", "broker_id": 1, "alive": False})
    after = orjson.loads(cache.body(gzipped=True) and cache.body(gzipped=False))
    assert after["version"] == model.version
    assert after["state"] == [["c/broker/1", {"kind": "broker", "broker_id": 1, "alive": False}]]
    assert gzip.decompress(cache.body(gzipped=True)) == cache.body(gzipped=False)


# A put: state of a broker (or its deletion), an alert firing or resolving, or a row.
PUTS = st.lists(
    st.tuples(
        st.sampled_from(["state", "gone", "fire", "resolve", "row"]),
        st.integers(min_value=1, max_value=6),
    ),
    max_size=60,
)


def _put(model: LiveModel, kind: str, n: int, seq: int) -> None:
    if kind in ("state", "gone"):
        value = {"kind": "broker", "broker_id": n, "alive": seq % 2 == 0}
        model.put_state(f"c/broker/{n}", None if kind == "gone" else value)
    elif kind in ("fire", "resolve"):
        model.put_alert(_alert("FIRING" if kind == "fire" else "RESOLVED",
                               alert_id=f"a{n}", started_ms=seq))  # fmt: skip
    else:
        change = {"type": EventType.BROKER_FENCED, "broker_id": n}
        model.put_rows(rows(_record("UPDATE", [change], seq=seq)))


@given(before=PUTS, after=PUTS, most=st.integers(min_value=1, max_value=7))
def test_changes_told_in_bites_leave_a_page_with_what_one_snapshot_gives(
    before: list[tuple[str, int]], after: list[tuple[str, int]], most: int
) -> None:
    model = LiveModel()
    for seq, (kind, n) in enumerate(before):
        _put(model, kind, n, seq)
    page = model.snapshot()
    state = dict(map(tuple, page["state"]))
    alerts = {a["alert_id"]: a for a in page["alerts"]}
    recent = list(page["recent"])
    for seq, (kind, n) in enumerate(after, start=len(before)):
        _put(model, kind, n, seq)
    version, bites = page["version"], 0
    while version < model.version:
        told = model.changes_since(version, most=most)
        assert told is not None and told["version"] > version
        state.update((k, v) for k, v in told["state"])
        alerts.update((a["alert_id"], a) for a in told["alerts"])
        recent = (recent + told["recent"])[-live_model.RECENT_ROWS :]
        version, bites = told["version"], bites + 1
    whole = model.snapshot()
    assert {k: v for k, v in state.items() if v is not None} == dict(map(tuple, whole["state"]))
    assert alerts == {a["alert_id"]: a for a in whole["alerts"]}
    assert recent == whole["recent"]
    assert bites <= -(-len(after) // most)  # ceil: no more bites than the cap makes
