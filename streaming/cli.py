"""`zkcdc stream alerts`."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click

from streaming.alert_runner import AlertJobOptions, run
from streaming.alert_sinks import SinkOptions
from streaming.change_source import KafkaInput, LogInput
from streaming.errors import StreamingError
from streaming.rule_settings import RuleSettings
from zkcdc.cli_options import key_values


def default_checkpoint() -> Path:
    from zkcdc.stack.settings import default_state_dir

    return default_state_dir().parent / "stream" / "alerts"


@click.group()
def stream() -> None:
    """The Structured Streaming jobs (Spark): alerts from the change records."""


@stream.command("alerts")
@click.option("--bootstrap-servers", help="Kafka: read the changes topic, publish alerts.")
@click.option("--topic", default="zkcdc.changes", show_default=True, help="The changes topic.")
@click.option(
    "--event-log",
    type=click.Path(file_okay=False, path_type=Path),
    help="Read event-log files from this folder instead of Kafka.",
)
@click.option("--alerts-topic", default="zkcdc.alerts", show_default=True)
@click.option("--no-publish", is_flag=True, help="Do not publish alerts to Kafka.")
@click.option("--alerts-out", type=click.Path(dir_okay=False, path_type=Path),
              help="Append alerts as JSON lines to this file.")  # fmt: skip
@click.option("--console", is_flag=True, help="Print alerts as JSON lines.")
@click.option("--alertmanager", metavar="URL", help="Forward to Alertmanager's API v2.")
@click.option("--checkpoint", type=click.Path(file_okay=False, path_type=Path),
              help="Checkpoint folder [default ~/.local/state/zkcdc/stream/alerts].")  # fmt: skip
@click.option("--master", default="local[2]", show_default=True,
              help="Spark master: local[N] or spark://HOST:PORT.")  # fmt: skip
@click.option("--rule", "rules", multiple=True, callback=key_values, metavar="NAME=VALUE",
              help="Override a rule setting, e.g. under_replicated_for_ms=2000.")  # fmt: skip
@click.option("--trigger-ms", default=500, show_default=True)
@click.option("--available-now", is_flag=True, help="Process what is there now, then stop.")
@click.option("--starting-offsets", default="earliest", show_default=True)
@click.option("--dead-letter-topic", default=None,
              help="Kafka topic for undecodable records [default: <topic>.deadletter].")  # fmt: skip
def alerts_command(
    bootstrap_servers: str | None,
    topic: str,
    event_log: Path | None,
    alerts_topic: str,
    no_publish: bool,
    alerts_out: Path | None,
    console: bool,
    alertmanager: str | None,
    checkpoint: Path | None,
    master: str,
    rules: dict[str, str],
    trigger_ms: int,
    available_now: bool,
    starting_offsets: str,
    dead_letter_topic: str | None,
) -> None:
    """Raise FIRING/RESOLVED alerts (CONTRACT.md section 3) from the change records."""
    source: KafkaInput | LogInput
    if event_log is not None:
        source = LogInput(event_log)
    elif bootstrap_servers:
        source = KafkaInput(bootstrap_servers, topic, starting_offsets)
    else:
        raise StreamingError("give --bootstrap-servers (the changes topic) or --event-log DIR")
    publish = bootstrap_servers if bootstrap_servers and not no_publish else None
    options = AlertJobOptions(
        source=source,
        sinks=SinkOptions(publish, alerts_topic, alerts_out, console, alertmanager),
        checkpoint=checkpoint or default_checkpoint(),
        master=master,
        rules=RuleSettings().with_overrides(rules),
        trigger_ms=trigger_ms,
        available_now=available_now,
        dead_letter_topic=dead_letter_topic or f"{topic}.deadletter",
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    run(options, stop)
