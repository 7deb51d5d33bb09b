"""The sinks' ledger: a batch the job died delivering is pending, and the re-run learns which of
its alerts the sinks already hold (here the JSON-lines file; the topic is read back the same
way in the integration tests)."""

from __future__ import annotations

from zkcdc.streaming.rules.alert_records import json_text
from zkcdc.streaming.sinks.alert_sinks import AlertSinks, SinkOptions
from zkcdc.streaming.sinks.ledger import BatchLedger
from zkcdc.streaming.sinks.sink import AlertText


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


def test_a_damaged_ledger_is_said_once_and_read_as_naming_no_batch(tmp_path, caplog):
    path = tmp_path / "sink-ledger"
    path.write_bytes(b"\xff\x00")
    ledger = BatchLedger(path)
    with caplog.at_level("WARNING", logger="zkcdc.stream"):
        assert ledger.last() == -1 and ledger.last() == -1
    said = [r for r in caplog.records if "sink ledger cannot be read" in r.getMessage()]
    assert len(said) == 1
    ledger.mark(5)  # the next micro-batch's delivery writes it whole again
    assert ledger.last() == 5


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


def test_alert_lines_spark_wrote_are_appended_in_part_order_leaving_out_those_delivered(tmp_path):
    from zkcdc.streaming.sinks.file_delivery import append_alerts, keyed_lines
    from zkcdc.streaming.sinks.json_lines import alert_key

    folder = tmp_path / "batch-out" / "7"
    (folder / "kind=alert").mkdir(parents=True)
    (folder / "kind=state").mkdir()
    first, second, third = (alert(f"c:broker_down:broker/{n}:5", "FIRING") for n in (1, 2, 3))
    (folder / "kind=alert" / "part-00001.txt").write_text(third.text + "\n")
    (folder / "kind=alert" / "part-00000.txt").write_text(first.text + "\n" + second.text + "\n")
    (folder / "kind=state" / "part-00000.txt").write_text(
        '{"key":"broker/1","json":"{}"}\n{"key":"broker/2"}\n'
    )
    out = tmp_path / "alerts.jsonl"
    sinks = AlertSinks(SinkOptions(alerts_out=out))
    sinks.deliver([first])
    with out.open("a") as file:
        file.write('{"alert_id": "c:broker_do')  # the crash cut the delivery of batch 7 here
    there = sinks.delivered(0)
    append_alerts(folder, out, skip=lambda line: alert_key(line) in there)
    assert out.read_text().splitlines() == [
        first.text, '{"alert_id": "c:broker_do', second.text, third.text
    ]  # fmt: skip
    assert list(keyed_lines(folder, "state")) == [("broker/1", "{}"), ("broker/2", None)]


def test_a_resumed_batch_gives_each_sink_only_what_it_lacks_and_the_console_all(tmp_path, capsys):
    out = tmp_path / "alerts.jsonl"
    sinks = AlertSinks(SinkOptions(alerts_out=out, console=True))
    first, second = alert("c:a:broker/1:5", "FIRING"), alert("c:a:broker/2:5", "FIRING")
    sinks.deliver([first])  # the crash came after the first alert reached the file
    capsys.readouterr()
    sinks.deliver([first, second], resumed_since_ms=0)
    assert out.read_text().splitlines() == [first.text, second.text]  # each once
    assert capsys.readouterr().out.splitlines() == [first.text, second.text]  # at least once
    assert all(sink.guarantee for sink in sinks.sinks)
