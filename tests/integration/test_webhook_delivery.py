"""The webhook sink against a real HTTP receiver on loopback: every alert arrives, in order,
and a receiver down for several of the sink's longest retry intervals (its backoff cap, set small
here as users can with --delivery-max-backoff-s) loses none (the sink's own thread and real HTTP,
no fakes)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from alerts_harness import Receiver, receiver_port
from conftest import wait_until

from zkcdc.streaming.sinks.alert_sinks import AlertSinks, SinkOptions
from zkcdc.streaming.sinks.sink import AlertText

pytestmark = pytest.mark.integration
MAX_BACKOFF_S = 2.0
DOWN_S = 4 * MAX_BACKOFF_S  # past the cap: retries at the longest interval, several times


def _alert(n: int, status: str) -> AlertText:
    alert = {"alert_id": f"w:broker_down:broker/{n}:{n}", "rule": "broker_down",
             "severity": "critical", "status": status, "cluster": "w", "entity": f"broker/{n}",
             "started_ms": n, "ended_ms": n + 1 if status == "RESOLVED" else None,
             "summary": f"broker {n} down", "details": {}}  # fmt: skip
    at = n + 1 if status == "RESOLVED" else n  # event time: a RESOLVED's end
    return AlertText(alert["alert_id"], status, at, json.dumps(alert))


def test_a_receiver_down_past_the_backoff_cap_loses_no_alert_and_gets_them_in_order(
    tmp_path: Path,
) -> None:
    port = receiver_port()
    url = f"http://127.0.0.1:{port}/hooks/SECRET-PART"
    receiver = Receiver(port)
    options = SinkOptions(webhooks=(url,), delivery_max_backoff_s=MAX_BACKOFF_S)
    sinks = AlertSinks(options, checkpoint=tmp_path / "checkpoint")
    try:
        sinks.deliver([_alert(1, "FIRING")])
        wait_until(lambda: len(receiver.taken) == 1, 10, what="the first alert")
        receiver.stop()
        sinks.deliver([_alert(2, "FIRING"), _alert(1, "RESOLVED")])
        time.sleep(DOWN_S)  # fixed wait: an outage held for its set time
        receiver = Receiver(port)
        wait_until(lambda: len(receiver.taken) == 2, 10 * MAX_BACKOFF_S, what="the outage's alerts")
        assert [(a["alert_id"], a["status"]) for a in receiver.taken] == [
            ("w:broker_down:broker/2:2", "FIRING"), ("w:broker_down:broker/1:1", "RESOLVED")]  # fmt: skip
    finally:
        sinks.close()
        receiver.stop()
    saved = next((tmp_path / "checkpoint").glob("webhook-*.json")).read_text()
    assert json.loads(saved)["outbox"] == [] and "SECRET" not in saved
