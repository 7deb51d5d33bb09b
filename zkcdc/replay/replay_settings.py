"""Settings of `zkcdc replay`: flags > `ZKCDC_REPLAY_*` environment variables > the `[replay]`
table of a TOML file (`--config`, `ZKCDC_CONFIG_FILE`) > defaults
(zkcdc/ground/command_settings.py). Replay's variables have a prefix of their own: a one-off
replay on a host whose environment runs a capture or an alert job must not take their
`ZKCDC_CHECKPOINT` or `ZKCDC_ALERTS_OUT` for its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from zkcdc.ground import command_settings, environment

ENV_PREFIX = "ZKCDC_REPLAY_"


class ReplaySettings(command_settings.CommandSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")
    toml_table = "replay"

    config_file: Path | None = None  # TOML: `[replay]` (or the top level), under env and flags
    # What to replay: an event log (the command's PATH), or the history of Kafka's own files.
    txnlog: Path | None = None
    chroot: str = ""
    metadata_log: Path | None = None
    cluster: str | None = None
    # Into Kafka ...
    bootstrap_servers: str | None = None
    kafka_config_file: Path | None = None
    kafka_config: dict[str, SecretStr] = Field(default_factory=dict)
    topic: str = "zkcdc.changes"
    schema_registry: str | None = None
    speed: float = 0.0  # 0: as fast as possible
    checkpoint: Path | None = None
    from_start: bool = False
    # ... or through the alert rules.
    alerts_out: Path | None = None
    state_out: Path | None = None
    rules: dict[str, str] = Field(default_factory=dict)
    master: str = "local[2]"
    shards: int | None = Field(default=None, ge=0, le=256)  # None: auto
    # ... or into the lake's tables.
    lake: str | None = None

    def kafka_pairs(self) -> dict[str, str]:
        return {k: v.get_secret_value() for k, v in self.kafka_config.items()}


def load(flags: dict[str, Any]) -> ReplaySettings:
    if unknown := environment.unknown_in_family(ENV_PREFIX, ReplaySettings.model_fields):
        raise command_settings.SettingsError(unknown)
    return command_settings.load(ReplaySettings, flags)
