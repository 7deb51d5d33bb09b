"""The Alertmanager notifier in isolation (an injected clock and post): firing alerts re-sent
with an endsAt ahead, failed posts retried with backoff and nothing dropped, resolved alerts sent
until taken, and what is due kept across a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkcdc.streaming.sinks.alertmanager import AlertmanagerNotifier, iso


def alert(alert_id: str, status: str = "FIRING", started: int = 1_000, ended: int | None = None):
    return {
        "alert_id": alert_id, "rule": "broker_down", "severity": "critical", "cluster": "c",
        "entity": "broker/3", "summary": "broker 3 is not registered", "details": {},
        "status": status, "started_ms": started, "ended_ms": ended,
    }  # fmt: skip


class FakeAlertmanager:
    def __init__(self) -> None:
        self.up = True
        self.posts: list[list[dict[str, Any]]] = []

    def post(self, url: str, alerts: list[dict[str, Any]]) -> None:
        if not self.up:
            raise ConnectionRefusedError("connection refused")
        self.posts.append(alerts)

    def ids(self, post: int = -1) -> list[str]:
        return [a["labels"]["alert_id"] for a in self.posts[post]]


@pytest.fixture
def clock() -> list[float]:
    return [100.0]


def make(
    clock: list[float], am: FakeAlertmanager, state: Path | None = None
) -> AlertmanagerNotifier:
    # jitter 1: each wait is its cap (a random share of it in the product: test_backoff.py)
    return AlertmanagerNotifier("http://am", resend_s=10, state_file=state,
                                now=lambda: clock[0], post=am.post, jitter=lambda: 1.0)  # fmt: skip


def test_a_firing_alert_is_sent_again_every_resend_with_ends_at_four_resends_ahead(clock):
    am = FakeAlertmanager()
    notifier = make(clock, am)
    notifier.update([alert("a")])
    assert notifier.send_due() == 10
    assert am.posts[0][0]["endsAt"] == iso((100 + 40) * 1000)
    clock[0] = 105
    notifier.send_due()
    assert len(am.posts) == 1  # not due yet
    for t in (110, 120, 130):
        clock[0] = t
        notifier.send_due()
    assert len(am.posts) == 4 and am.posts[-1][0]["endsAt"] == iso((130 + 40) * 1000)


def test_a_failed_post_is_retried_with_backoff_and_nothing_is_dropped(clock):
    am = FakeAlertmanager()
    notifier = make(clock, am)
    am.up = False
    notifier.update([alert("a")])
    waits = [notifier.send_due()]
    for _ in range(6):
        clock[0] += waits[-1]
        waits.append(notifier.send_due())
    assert waits == [1, 2, 4, 8, 16, 30, 30]
    notifier.update([alert("b"), alert("a", "RESOLVED", ended=5_000)])
    am.up = True
    notifier.send_due()  # new alerts are due at once
    assert sorted(am.ids()) == ["a", "b"]
    resolved = next(a for a in am.posts[-1] if a["labels"]["alert_id"] == "a")
    assert resolved["endsAt"] == iso(5_000)
    clock[0] += 10
    notifier.send_due()
    assert am.ids() == ["b"], "a resolved alert is sent until taken, then no more"


def test_what_is_due_is_kept_across_a_restart(clock, tmp_path: Path):
    am = FakeAlertmanager()
    state = tmp_path / "alertmanager.json"
    make(clock, am, state).update([alert("a"), alert("b"), alert("b", "RESOLVED", ended=2_000)])
    am.up = True
    again = make(clock, am, state)
    assert again.pending == 2
    again.send_due()
    assert sorted(am.ids()) == ["a", "b"]


def test_an_unreadable_state_file_starts_empty(clock, tmp_path: Path):
    state = tmp_path / "alertmanager.json"
    state.write_text("{not json")
    assert make(clock, FakeAlertmanager(), state).pending == 0


def test_the_state_file_is_written_when_what_is_due_changes_not_on_every_resend(
    clock, tmp_path: Path
):
    am = FakeAlertmanager()
    state = tmp_path / "alertmanager.json"
    notifier = make(clock, am, state)
    notifier.update([alert("a"), alert("b", "RESOLVED", ended=2_000)])
    notifier.send_due()  # b taken: what is due changed
    assert make(clock, am, state).pending == 1, "the taken resolved alert is no longer due"
    state.write_text('{"firing": {}, "resolved": {}}')  # marks the file: a rewrite replaces it
    for _ in range(3):
        clock[0] += 10
        notifier.send_due()
    assert len(am.posts) == 4
    assert state.read_text() == '{"firing": {}, "resolved": {}}', "a plain resend rewrote it"
