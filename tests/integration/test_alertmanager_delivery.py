"""Alerts in a real Prometheus Alertmanager (Debian's package) as the alert job's sinks send
them: a firing alert stays active for many times Alertmanager's `resolve_timeout` while it
holds, and resolves when it ends; an Alertmanager down for several of the sink's longest retry
intervals (its backoff cap, set small here as users can with --delivery-max-backoff-s) loses no
alert."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from alertmanager_server import Alertmanager, alertmanager_binary
from conftest import wait_until

from zkcdc.stack import probes
from zkcdc.streaming.sinks.alert_sinks import AlertSinks, SinkOptions
from zkcdc.streaming.sinks.sink import AlertText

pytestmark = pytest.mark.integration

RESOLVE_TIMEOUT_S = 3
MAX_BACKOFF_S = 2.0
DOWN_S = 4 * MAX_BACKOFF_S  # past the cap: retries at the longest interval, several times


def _alert(alert_id: str, status: str, started_ms: int, ended_ms: int | None = None) -> AlertText:
    alert = {
        "alert_id": alert_id, "rule": "broker_down", "severity": "critical", "status": status,
        "cluster": "am-test", "entity": alert_id, "started_ms": started_ms, "ended_ms": ended_ms,
        "summary": f"{alert_id} is down", "details": {"broker": "3"},
    }  # fmt: skip
    return AlertText(alert_id, status, ended_ms or started_ms, json.dumps(alert))


def _active(manager: Alertmanager) -> set[str] | None:
    """The ids Alertmanager holds active; None when it did not answer (starting, or slow on a
    busy machine), which is never taken for "none active"."""
    try:
        with urllib.request.urlopen(manager.url + "/api/v2/alerts?active=true", timeout=30) as r:
            alerts: list[dict[str, Any]] = json.loads(r.read())
    except OSError:
        return None
    return {a["labels"]["alert_id"] for a in alerts if a["status"]["state"] == "active"}


def _answered(manager: Alertmanager) -> set[str]:
    """The active ids, asking again while Alertmanager does not answer."""
    answers: list[set[str]] = []

    def answer() -> bool:
        active = _active(manager)
        if active is not None:
            answers.append(active)
        return active is not None

    wait_until(answer, 60, what="Alertmanager to answer")
    return answers[-1]


def test_alerts_stay_active_while_they_hold_resolve_when_they_end_and_survive_an_outage(
    tmp_path: Path,
) -> None:
    port = probes.free_port()
    binary = alertmanager_binary()
    timeout = f"{RESOLVE_TIMEOUT_S}s"
    manager = Alertmanager(binary, tmp_path / "am", port, resolve_timeout=timeout)
    options = SinkOptions(
        alertmanager=manager.url, alertmanager_resend_s=1.0, delivery_max_backoff_s=MAX_BACKOFF_S
    )
    sinks = AlertSinks(options, checkpoint=tmp_path / "checkpoint")
    now_ms = int(time.time() * 1000)
    try:
        sinks.deliver([_alert("a", "FIRING", now_ms)])
        wait_until(lambda: "a" in (_active(manager) or ()), 10, what="alert a active")
        # Three times the resolve timeout and more: still active, every second of it.
        for _ in range(int((3 * RESOLVE_TIMEOUT_S + 2) / 0.5)):
            assert "a" in _answered(manager), "a firing alert was resolved by Alertmanager itself"
            time.sleep(0.5)  # fixed wait: a look every half second through the period

        # Alertmanager down: a new alert fires and the first one ends meanwhile.
        manager.stop()
        sinks.deliver([_alert("b", "FIRING", now_ms + 1), _alert("a", "RESOLVED", now_ms,
                                                                  int(time.time() * 1000))])  # fmt: skip
        time.sleep(DOWN_S)  # fixed wait: an outage held for its set time
        manager = Alertmanager(binary, tmp_path / "am", port, resolve_timeout=timeout)
        wait_until(
            lambda: _active(manager) == {"b"}, 10 * MAX_BACKOFF_S, what="b active, a resolved"
        )
        for _ in range(int(2 * RESOLVE_TIMEOUT_S / 0.5)):
            assert _answered(manager) == {"b"}
            time.sleep(0.5)  # fixed wait: a look every half second through the period

        sinks.deliver([_alert("b", "RESOLVED", now_ms + 1, int(time.time() * 1000))])
        wait_until(lambda: _active(manager) == set(), 10, what="b resolved")
    finally:
        sinks.close()
        manager.stop()
