"""Settings of `zkcdc history`: flags > `ZKCDC_HISTORY_*` environment variables > the
`[history]` table of a TOML file (`--config`, `ZKCDC_CONFIG_FILE`) > defaults
(zkcdc/ground/command_settings.py). A prefix of its own, as replay's: a question to the lake
asked on a host that runs the jobs must not take their `ZKCDC_MASTER` for its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from zkcdc.ground import command_settings, environment

ENV_PREFIX = "ZKCDC_HISTORY_"


class HistorySettings(command_settings.CommandSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")
    toml_table = "history"

    config_file: Path | None = None  # TOML: `[history]` (or the top level), under env and flags
    lake: str | None = None
    master: str = "local[2]"
    driver_memory: str = "1g"
    cluster: str | None = None
    as_of_version: int | None = Field(default=None, ge=0)
    json_lines: bool = False


def load(flags: dict[str, Any]) -> HistorySettings:
    if unknown := environment.unknown_in_family(ENV_PREFIX, HistorySettings.model_fields):
        raise command_settings.SettingsError(unknown)
    return command_settings.load(HistorySettings, flags)
