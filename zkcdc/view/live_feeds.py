"""The edges of `zkcdc ui`: threads that read the state, alerts and changes topics from their
beginning and follow them, and one that scrapes the capture daemons' metrics, all into one
LiveModel."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from zkcdc.ground import logs
from zkcdc.ground.change_values import ChangeValueDecoder
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.streaming.state.state_values import state_entry
from zkcdc.view.alerts_tail import alert_of
from zkcdc.view.event_rows import rows
from zkcdc.view.live_model import LiveModel
from zkcdc.view.topic_follower import TopicFollower

log = logs.get("zkcdc.ui")
TOPIC_WAIT_S = 24 * 3600.0  # a topic the alert job has not made yet is waited for
RETRY_S = 5.0  # a topic Kafka would not give is asked for again; the page waits, not dies


@dataclass(frozen=True)
class Feed:
    """How one topic's messages reach the model: `decode` is pure (whatever it raises on is
    the message's fault: skipped and counted), `apply` puts a decoded value in."""

    name: str  # state, alerts, changes
    decode: Callable[[Any], Any]
    apply: Callable[[Any], None]


def _follow(
    kafka: KafkaConnection,
    topic: str,
    feed: Feed,
    model: LiveModel,
    stop: threading.Event,
) -> None:
    while True:
        try:
            follower = TopicFollower(kafka, topic, wait_s=TOPIC_WAIT_S)
            break
        except Exception as exc:  # the page says what it lacks; the other feeds go on
            log.error("cannot read a topic", topic=topic, reason=str(exc), retry_in_s=RETRY_S)
            if stop.wait(RETRY_S):
                return
    skipped = UnreadableMessages(f"ui {feed.name}")
    try:
        while not stop.is_set():
            messages = follower.poll(0.2)
            for message in messages:
                value = skipped.read(message, feed.decode)
                if value is not None:
                    feed.apply(value)
            model.skipped[feed.name] = skipped.count
            if messages:
                model.note_read(feed.name, messages[-1].timestamp()[1])
            elif follower.caught_up and follower.at_end():
                model.note_at_end(feed.name)
            if follower.caught_up and not model.loaded[feed.name]:
                model.mark_loaded(feed.name)
                log.info("topic read to its end", topic=topic, skipped=skipped.count)
    finally:
        follower.close()


def state_feed(model: LiveModel) -> Feed:
    return Feed("state", state_entry, lambda entry: model.put_state(*entry))


def alerts_feed(model: LiveModel) -> Feed:
    return Feed("alerts", alert_of, model.put_alert)


def changes_feed(model: LiveModel, decoder: ChangeValueDecoder) -> Feed:
    def decode(message: Any) -> list[dict[str, Any]]:
        return rows(decoder.decode(message.value() or b""))

    def apply(found: list[dict[str, Any]]) -> None:
        if found:
            model.put_rows(found)

    return Feed("changes", decode, apply)


def capture_health(text: str) -> dict[str, Any]:
    """The figures the page shows, from a capture daemon's /metrics text."""
    values: dict[str, float] = {}
    lag_sum = lag_count = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "zkcdc_capture_lag_seconds_sum":
                lag_sum = sample.value
            elif sample.name == "zkcdc_capture_lag_seconds_count":
                lag_count = sample.value
            elif sample.name in (
                "zkcdc_capture_active", "zkcdc_capture_zookeeper_connected", "zkcdc_capture_seq",
                "zkcdc_capture_backlog", "zkcdc_capture_versions_skipped_total",
            ):  # fmt: skip
                values[sample.name] = sample.value
    return {
        "up": True,
        "active": values.get("zkcdc_capture_active") == 1,
        "connected": values.get("zkcdc_capture_zookeeper_connected") == 1,
        "seq": int(values.get("zkcdc_capture_seq", -1)),
        "backlog": int(values.get("zkcdc_capture_backlog", 0)),
        "versions_skipped": int(values.get("zkcdc_capture_versions_skipped_total", 0)),
        "lag_mean_ms": round(1000 * lag_sum / lag_count, 1) if lag_count else None,
    }


def _scrape(urls: list[str], model: LiveModel, stop: threading.Event, every_s: float) -> None:
    while not stop.is_set():
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    health = capture_health(response.read().decode())
            except (OSError, ValueError) as exc:
                health = {"up": False, "reason": str(exc)[:200]}
            model.put_capture(url, health)
        stop.wait(every_s)


class LiveFeeds:
    def __init__(
        self,
        kafka: KafkaConnection,
        topics: dict[str, str],  # feed (state, alerts, changes) -> topic
        model: LiveModel,
        capture_metrics: list[str],
        decoder: ChangeValueDecoder,
    ) -> None:
        self._stop = threading.Event()
        feeds = {
            "state": state_feed(model),
            "alerts": alerts_feed(model),
            "changes": changes_feed(model, decoder),
        }
        self._threads = [
            threading.Thread(
                target=_follow, args=(kafka, topic, feeds[feed], model, self._stop),
                name=f"ui-{feed}", daemon=True,
            )
            for feed, topic in topics.items()
        ]  # fmt: skip
        if capture_metrics:
            self._threads.append(threading.Thread(
                target=_scrape, args=(capture_metrics, model, self._stop, 2.0),
                name="ui-capture", daemon=True,
            ))  # fmt: skip
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
