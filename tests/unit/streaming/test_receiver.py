"""What the network sinks share (streaming/sinks/receiver.py): a receiver going away and
coming back is one log line each however many retries come between, with a jittered wait
that grows; an outbox file that cannot be read starts the sender empty, with a warning."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from zkcdc.streaming.sinks.receiver import ReceiverHealth, SavedOutbox, SenderThread


def test_a_receiver_down_for_many_tries_is_one_line_going_and_one_coming_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health = ReceiverHealth("webhook", "https://hooks.example/…", 8.0, jitter=lambda: 1.0)
    with caplog.at_level(logging.INFO, logger="zkcdc.webhook"):
        waits = [health.failed("connection refused") for _ in range(6)]
        health.succeeded()
        health.succeeded()
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    events = [r.getMessage() for r in caplog.records]
    assert events == ["webhook unreachable: retrying", "webhook reachable again"]
    assert health.failed("again") == 1.0  # the backoff starts over once it was taken


def test_the_wait_is_jittered_below_the_backoff() -> None:
    health = ReceiverHealth("alertmanager", "http://am", 30.0, jitter=lambda: 0.25)
    assert [health.failed("x") for _ in range(3)] == [0.25, 0.5, 1.0]


@pytest.mark.parametrize("text", ["not json", "[1, 2]", ""])
def test_an_unreadable_outbox_starts_empty_with_a_warning(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "outbox.json"
    file.write_text(text)
    with caplog.at_level(logging.WARNING, logger="zkcdc.webhook"):
        assert SavedOutbox("webhook", file).load() is None
    assert [r.getMessage() for r in caplog.records] == ["webhook outbox unreadable: starting empty"]


def test_an_outbox_is_kept_across_a_restart_and_none_without_a_checkpoint(tmp_path: Path) -> None:
    SavedOutbox("webhook", tmp_path / "o.json").save({"outbox": [{"alert_id": "a"}]})
    assert SavedOutbox("webhook", tmp_path / "o.json").load() == {"outbox": [{"alert_id": "a"}]}
    nowhere = SavedOutbox("webhook", None)
    nowhere.save({"outbox": []})
    assert nowhere.load() is None


def test_a_sender_thread_makes_one_last_try_as_it_closes() -> None:
    class Sender:
        def __init__(self) -> None:
            self.tries = 0
            self.running = threading.Event()

        def run(self, stop: threading.Event) -> None:
            self.running.set()
            stop.wait()

        def send_due(self) -> float:
            self.tries += 1
            return 1.0

    sender = Sender()
    thread = SenderThread(sender, "test-sender")
    assert sender.running.wait(10)
    thread.close()
    assert sender.tries == 1
