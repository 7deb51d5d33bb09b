"""The sinks' ledger: a batch the job died delivering is pending, and the re-run learns which of
its alerts the sinks already hold (here the JSON-lines file; the topic is read back the same
way in the integration tests)."""

from __future__ import annotations

from streaming.alert_records import json_text
from streaming.alert_sinks import AlertSinks, AlertText, BatchLedger, SinkOptions


def alert(alert_id: str, status: str) -> AlertText:
    text = json_text({"alert_id": alert_id, "status": status, "started_ms": 1, "ended_ms": None})
    return AlertText(alert_id, status, 1, text)


def test_a_batch_begun_and_not_marked_is_pending_until_marked(tmp_path):
    ledger = BatchLedger(tmp_path / "sink-ledger")
    assert ledger.last() == -1 and ledger.pending() is None
    ledger.begin(4, 1_000)
    assert ledger.pending() == (4, 1_000) and ledger.last() == -1  # died here
    ledger.mark(4)
    assert ledger.pending() is None and ledger.last() == 4


def test_the_alerts_a_sink_holds_are_known_and_a_line_cut_short_stays_apart(tmp_path):
    out = tmp_path / "alerts.jsonl"
    sinks = AlertSinks(SinkOptions(alerts_out=out))
    sinks.deliver([alert("c:broker_down:broker/1:5", "FIRING")])
    with out.open("a") as file:
        file.write('{"alert_id": "c:contr')  # the crash cut the last line
    assert sinks.delivered(0) == {("c:broker_down:broker/1:5", "FIRING")}
    sinks.deliver([alert("c:broker_down:broker/1:5", "RESOLVED")])  # the re-run's rest
    assert sinks.delivered(0) == {
        ("c:broker_down:broker/1:5", "FIRING"),
        ("c:broker_down:broker/1:5", "RESOLVED"),
    }
    assert out.read_text().splitlines()[1] == '{"alert_id": "c:contr'  # kept apart
