"""Where alerts go, once per micro-batch on the driver: every sink the options name (the
alerts topic, a JSON-lines file, the console, Prometheus Alertmanager, webhooks), each with its own
delivery guarantee (`Sink.guarantee`). A re-run of a batch the job died delivering sends each
sink only what it does not hold yet, where the sink can tell (`ledger.BatchLedger`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.streaming.sinks.alertmanager import AlertmanagerSink
from zkcdc.streaming.sinks.console import ConsoleSink
from zkcdc.streaming.sinks.json_lines import JsonLinesSink
from zkcdc.streaming.sinks.kafka_topic import KafkaTopicSink
from zkcdc.streaming.sinks.sink import AlertKey, AlertText, Sink
from zkcdc.streaming.sinks.webhook import PayloadFormat, WebhookSink


@dataclass(frozen=True)
class SinkOptions:
    kafka: KafkaConnection | None = None  # publish alerts there
    alerts_topic: str = "zkcdc.alerts"
    alerts_out: Path | None = None
    console: bool = False
    alertmanager: str | None = None
    alertmanager_resend_s: float = 60.0
    webhooks: tuple[str, ...] = ()
    webhook_format: PayloadFormat = "json"
    # A receiver that is down is asked again after 1 s, 2 s, 4 s ... up to this.
    delivery_max_backoff_s: float = 30.0

    @property
    def files_only(self) -> bool:
        """Alerts go to the JSON-lines file alone (Spark can write them itself)."""
        return (
            self.alerts_out is not None
            and not self.kafka
            and not self.console
            and not self.alertmanager
            and not self.webhooks
        )


def build_sinks(options: SinkOptions, checkpoint: Path | None = None) -> list[Sink]:
    """The sinks `options` name. `checkpoint`: the job's checkpoint folder, where what
    Alertmanager is still due is kept between runs."""
    sinks: list[Sink] = []
    if options.kafka:
        sinks.append(KafkaTopicSink(options.kafka, options.alerts_topic))
    if options.alerts_out is not None:
        sinks.append(JsonLinesSink(options.alerts_out))
    if options.console:
        sinks.append(ConsoleSink())
    if options.alertmanager:
        state = None if checkpoint is None else checkpoint / "alertmanager.json"
        sinks.append(
            AlertmanagerSink(
                options.alertmanager,
                options.alertmanager_resend_s,
                state,
                options.delivery_max_backoff_s,
            )
        )
    for url in options.webhooks:
        sinks.append(
            WebhookSink(url, options.webhook_format, checkpoint, options.delivery_max_backoff_s)
        )
    return sinks


class AlertSinks:
    def __init__(self, options: SinkOptions, checkpoint: Path | None = None) -> None:
        self.options = options
        self.sinks = build_sinks(options, checkpoint)

    def deliver(self, alerts: list[AlertText], resumed_since_ms: int | None = None) -> None:
        """To every sink in event-time order. `resumed_since_ms`: this batch's delivery began
        then and never finished; a sink that can tell gets only what it does not hold."""
        alerts.sort(key=lambda a: a.at_ms)
        for sink in self.sinks:
            todo = alerts
            if resumed_since_ms is not None and alerts:
                held = sink.delivered(resumed_since_ms)
                if held is not None:
                    todo = [a for a in alerts if (a.alert_id, a.status) not in held]
            sink.deliver(todo)

    def delivered(self, since_ms: int) -> set[AlertKey]:
        """What the sinks that can tell hold from `since_ms` on."""
        found: set[AlertKey] = set()
        for sink in self.sinks:
            found.update(sink.delivered(since_ms) or ())
        return found

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
