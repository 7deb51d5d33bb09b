"""The webhook sink's notifier: order, retries, durability, the payloads, secrets kept."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from manual_clock import ManualClock

from zkcdc.cli import main
from zkcdc.streaming.sinks.sink import AlertText
from zkcdc.streaming.sinks.webhook import WebhookNotifier, body_of, shown, slack_text


def _alert(n: int, status: str = "FIRING", severity: str = "critical") -> AlertText:
    alert = {
        "alert_id": f"c:broker_down:broker/{n}:{n}", "rule": "broker_down", "severity": severity,
        "status": status, "cluster": "c", "entity": f"broker/{n}", "started_ms": n,
        "ended_ms": None if status == "FIRING" else n + 1, "summary": f"broker {n} is down",
        "details": {},
    }  # fmt: skip
    return AlertText(alert["alert_id"], status, n, json.dumps(alert))


class Receiver:
    """A scripted receiver: answers `script` in turn (an int status, or an OSError to raise),
    then 200; keeps what it took."""

    def __init__(self, *script: int | Exception) -> None:
        self.script = list(script)
        self.taken: list[dict[str, object]] = []
        self.tries = 0

    def __call__(self, url: str, body: bytes) -> int:
        self.tries += 1
        answer = self.script.pop(0) if self.script else 200
        if isinstance(answer, Exception):
            raise answer
        if 200 <= answer < 300:
            self.taken.append(json.loads(body))
        return answer


def test_alerts_reach_the_receiver_in_order_each_once() -> None:
    receiver = Receiver()
    notifier = WebhookNotifier("http://h/x", post=receiver, now=ManualClock(1000.0))
    notifier.update([_alert(1), _alert(2), _alert(1, "RESOLVED")])
    notifier.send_due()
    assert [(a["alert_id"], a["status"]) for a in receiver.taken] == [
        ("c:broker_down:broker/1:1", "FIRING"),
        ("c:broker_down:broker/2:2", "FIRING"),
        ("c:broker_down:broker/1:1", "RESOLVED"),
    ]
    assert notifier.pending == 0


@pytest.mark.parametrize(
    "failure",
    [
        OSError("connection refused"),
        # Something not HTTP on the port (py4j's server once took a stopped receiver's).
        http.client.BadStatusLine("!zspy4j.Py4JException: Unknown command received"),
        http.client.RemoteDisconnected("closed"),
        503, 500, 429, 408,
    ],
)  # fmt: skip
def test_a_receiver_that_is_down_loses_nothing_and_is_retried_with_growing_backoff(
    failure: int | Exception,
) -> None:
    clock = ManualClock(1000.0)
    receiver = Receiver(failure, failure, failure)
    # The cap of each wait (the wait itself is a random share of it: tests/unit/test_backoff.py)
    notifier = WebhookNotifier("http://h/x", post=receiver, now=clock, jitter=lambda: 1.0)
    notifier.update([_alert(1), _alert(2)])
    waits = []
    for _ in range(3):
        waits.append(notifier.send_due())
        assert notifier.send_due() > 0 and receiver.tries == len(waits)  # not before it is due
        clock.now += waits[-1]
    assert waits == [1.0, 2.0, 4.0]
    assert receiver.taken == [] and notifier.pending == 2
    notifier.send_due()
    assert [a["started_ms"] for a in receiver.taken] == [1, 2]
    notifier.update([_alert(3)])
    notifier.send_due()
    assert receiver.tries == 6, "the backoff starts again from 1 s once the receiver is back"


def test_an_alert_the_receiver_refuses_for_good_is_dropped_and_the_rest_go_on() -> None:
    receiver = Receiver(400)
    notifier = WebhookNotifier("http://h/x", post=receiver, now=ManualClock(1000.0))
    notifier.update([_alert(1), _alert(2)])
    notifier.send_due()
    assert [a["started_ms"] for a in receiver.taken] == [2]
    assert notifier.dropped == 1 and notifier.pending == 0


def test_the_outbox_outlives_the_job_and_a_rerun_batch_sends_nothing_twice(tmp_path: Path) -> None:
    state = tmp_path / "webhook.json"
    clock = ManualClock(1000.0)
    down = Receiver(OSError("down"))
    first = WebhookNotifier("http://h/x", post=down, now=clock, state_file=state)
    first.update([_alert(1), _alert(2)])
    first.send_due()  # fails: both stay queued on disk
    assert down.taken == []

    receiver = Receiver()
    second = WebhookNotifier("http://h/x", post=receiver, now=clock, state_file=state)
    assert second.pending == 2
    second.send_due()
    # The job died mid-batch and re-runs it: what was sent is held, so not queued again.
    held = second.held(clock.now - 10)
    second.update(
        [a for a in [_alert(1), _alert(2), _alert(3)] if (a.alert_id, a.status) not in held]
    )
    second.send_due()
    assert [a["started_ms"] for a in receiver.taken] == [1, 2, 3]


def test_an_unreadable_outbox_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    state = tmp_path / "webhook.json"
    state.write_text("{not json")
    notifier = WebhookNotifier(
        "http://h/x", post=Receiver(), now=ManualClock(1000.0), state_file=state
    )
    assert notifier.pending == 0


def test_the_slack_payload_is_one_text_line_with_the_alert_in_it() -> None:
    body = json.loads(body_of(_alert(3).text, "slack"))
    assert list(body) == ["text"]
    assert "FIRING" in body["text"] and "broker_down" in body["text"]
    assert "broker/3" in body["text"] and "broker 3 is down" in body["text"]
    resolved = slack_text(json.loads(_alert(3, "RESOLVED").text))
    assert resolved.startswith(":white_check_mark: *RESOLVED*")
    assert json.loads(body_of(_alert(3).text, "json"))["alert_id"] == _alert(3).alert_id


def test_a_webhook_url_is_never_shown_past_its_host() -> None:
    secret = "https://hooks.example.com:8443/services/T000/B000/XXXXSECRET?token=abc"
    assert "SECRET" not in shown(secret) and "abc" not in shown(secret)
    assert shown(secret).startswith("https://hooks.example.com:8443/")


@pytest.mark.parametrize("bad", ["hooks.example.com/x", "ftp://h/x", "http:///nohost"])
def test_a_bad_webhook_url_is_one_clear_line(bad: str) -> None:
    result = CliRunner().invoke(
        main, ["stream", "alerts", "--event-log", "/nonexistent", "--webhook", bad]
    )
    assert result.exit_code == 2
    assert "--webhook" in result.output and "not an http:// or https:// URL" in result.output
    assert "Traceback" not in result.output


def test_the_backoff_cap_users_set_reaches_every_retrying_sink(tmp_path: Path) -> None:
    from zkcdc.streaming.sinks.alert_sinks import SinkOptions, build_sinks
    from zkcdc.streaming.sinks.alertmanager import AlertmanagerSink
    from zkcdc.streaming.sinks.webhook import WebhookSink

    options = SinkOptions(
        alertmanager="http://127.0.0.1:1",
        webhooks=("http://127.0.0.1:1/hook",),
        delivery_max_backoff_s=2.5,
    )
    sinks = build_sinks(options, tmp_path)
    try:
        (manager,) = [s for s in sinks if isinstance(s, AlertmanagerSink)]
        (hook,) = [s for s in sinks if isinstance(s, WebhookSink)]
        assert manager.notifier.max_backoff_s == 2.5
        assert hook.notifier.max_backoff_s == 2.5
        assert SinkOptions().delivery_max_backoff_s == 30.0  # the product's default
    finally:
        for sink in sinks:
            sink.close()
