"""Settings of `zkcdc stream alerts` and `zkcdc stream state`: flags > `ZKCDC_*` environment
variables > the `[stream]` table of a TOML file (`--config`, `ZKCDC_CONFIG_FILE`) > defaults
(zkcdc/ground/command_settings.py). The flags of both commands are fields here, with the
defaults `--help` shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import Field, PositiveInt, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from zkcdc.ground import command_settings
from zkcdc.ground.cli_options import jvm_memory
from zkcdc.streaming.job.alert_runner import TRIGGER_MS
from zkcdc.streaming.job.compiler_priority import COMPILER_NICENESS
from zkcdc.streaming.job.initial_state import TAKE_AT
from zkcdc.streaming.job.warm_up import WARM_UP_BATCHES
from zkcdc.streaming.sinks.webhook import PayloadFormat, webhook_url_problem


class StreamSettings(command_settings.CommandSettings):
    model_config = SettingsConfigDict(env_prefix="ZKCDC_", frozen=True, extra="forbid")
    toml_table = "stream"

    config_file: Path | None = None  # TOML: `[stream]` (or the top level), under env and flags
    # The input: the changes topic on Kafka, or a folder of event-log files.
    bootstrap_servers: str | None = None
    kafka_config_file: Path | None = None
    kafka_config: dict[str, SecretStr] = Field(default_factory=dict)
    topic: str = "zkcdc.changes"
    event_log: Path | None = None
    schema_registry: str | None = None
    starting_offsets: str = "earliest"
    max_records_per_batch: PositiveInt = 100_000
    # Where and how the job runs.
    checkpoint: Path | None = None
    master: str = "local[2]"
    driver_memory: str = "512m"
    shards: int | None = Field(default=None, ge=0, le=256)  # None: auto
    rules: dict[str, str] = Field(default_factory=dict)
    trigger_ms: PositiveInt = TRIGGER_MS
    warm_up_batches: int = Field(default=WARM_UP_BATCHES, ge=0, le=1000)
    take_backlog_at: int = Field(default=TAKE_AT, ge=0)
    compiler_niceness: int = Field(default=COMPILER_NICENESS, ge=0, le=19)
    available_now: bool = False
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"
    metrics_web_config: Path | None = None
    # What it writes.
    state_topic: str = "zkcdc.state"
    dead_letter_topic: str | None = None  # [default: <topic>.deadletter]
    alerts_topic: str = "zkcdc.alerts"
    no_publish: bool = False
    no_state: bool = False
    alerts_out: Path | None = None
    console: bool = False
    alertmanager: str | None = None
    alertmanager_resend_s: float = Field(default=60.0, ge=0.1)
    webhooks: tuple[str, ...] = ()
    webhook_format: PayloadFormat = "json"
    delivery_max_backoff_s: float = Field(default=30.0, ge=0.1)
    lake: str | None = None  # `stream history`: the lake's folder URI

    @field_validator("driver_memory")
    @classmethod
    def _jvm_size(cls, value: str) -> str:
        try:
            return jvm_memory(click.Context(click.Command("stream")), click.Option(["-x"]), value)
        except click.BadParameter as exc:
            raise ValueError(exc.message) from exc

    @field_validator("webhooks")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if (problem := webhook_url_problem(url)) is not None:
                raise ValueError(problem)
        return value

    def kafka_pairs(self) -> dict[str, str]:
        return {k: v.get_secret_value() for k, v in self.kafka_config.items()}


def load(flags: dict[str, Any]) -> StreamSettings:
    return command_settings.load(StreamSettings, flags)
