"""The webhook sink against a real HTTP receiver on loopback: every alert arrives, in order,
and a receiver down for 30 s loses none (the sink's own thread and real HTTP, no fakes)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from alerts_harness import Receiver
from conftest import wait_until

from zkcdc.streaming.sinks.alert_sinks import AlertSinks, SinkOptions
from zkcdc.streaming.sinks.sink import AlertText

pytestmark = pytest.mark.integration
DOWN_S = 30


def _alert(n: int, status: str) -> AlertText:
    alert = {"alert_id": f"w:broker_down:broker/{n}:{n}", "rule": "broker_down",
             "severity": "critical", "status": status, "cluster": "w", "entity": f"broker/{n}",
             "started_ms": n, "ended_ms": n + 1 if status == "RESOLVED" else None,
             "summary": f"broker {n} down", "details": {}}  # fmt: skip
    at = n + 1 if status == "RESOLVED" else n  # event time: a RESOLVED's end
    return AlertText(alert["alert_id"], status, at, json.dumps(alert))


def test_a_receiver_down_for_30_s_loses_no_alert_and_gets_them_in_order(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hooks/SECRET-PART"
    receiver = Receiver(port)
    sinks = AlertSinks(SinkOptions(webhooks=(url,)), checkpoint=tmp_path / "checkpoint")
    try:
        sinks.deliver([_alert(1, "FIRING")])
        wait_until(lambda: len(receiver.taken) == 1, 10, what="the first alert")
        receiver.stop()
        sinks.deliver([_alert(2, "FIRING"), _alert(1, "RESOLVED")])
        time.sleep(DOWN_S)
        receiver = Receiver(port)
        wait_until(lambda: len(receiver.taken) == 2, 40, what="the alerts of the outage")
        assert [(a["alert_id"], a["status"]) for a in receiver.taken] == [
            ("w:broker_down:broker/2:2", "FIRING"), ("w:broker_down:broker/1:1", "RESOLVED")]  # fmt: skip
    finally:
        sinks.close()
        receiver.stop()
    saved = next((tmp_path / "checkpoint").glob("webhook-*.json")).read_text()
    assert json.loads(saved)["outbox"] == [] and "SECRET" not in saved
