"""One way for a command to read its settings: flags given on its command line, then `ZKCDC_*`
environment variables, then its table of a TOML file (`--config FILE`, or `ZKCDC_CONFIG_FILE`),
then the settings model's defaults. A variable no zkcdc command knows, or a key the command's
table does not, is refused in one line with the closest known name.

A command's model is a `CommandSettings` with `env_prefix="ZKCDC_"` and `extra="forbid"`;
`load` gives it the flags the user typed (click's parameter source tells
them from defaults), so a flag's default never hides the environment or the file."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import click
from click.core import ParameterSource
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, TomlConfigSettingsSource

from zkcdc.ground import environment
from zkcdc.ground.cli_options import invalid_setting
from zkcdc.ground.errors import ZkcdcError

# The tables of a TOML file, one a command: a file may hold several commands' settings.
TABLES = ("capture", "stream", "replay", "history")

Settings = TypeVar("Settings", bound=BaseSettings)


class SettingsError(ZkcdcError):
    """A setting that cannot be used: unknown, malformed, or a config file that cannot be read."""


class TomlTable(TomlConfigSettingsSource):
    """pydantic-settings' TOML source on one command's table of the file, or on the file's top
    level when it holds no command's table; `dashed-keys` as the flags spell them."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None, table: str) -> None:
        if path is not None and not path.is_file():
            raise SettingsError(f"cannot read config file {path}: no such file")
        self.table = table
        super().__init__(settings_cls, toml_file=path)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        try:
            values = super()._read_file(file_path)
        except OSError as exc:
            raise SettingsError(f"cannot read config file {file_path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"config file {file_path}: {exc}") from exc
        if any(name in values for name in TABLES):
            values = values.get(self.table, {})
        return {str(k).replace("-", "_"): v for k, v in values.items()}


class CommandSettings(BaseSettings):
    """A command's settings model: its sources are its flags, the environment and its table
    of the TOML file named by its `config_file` field (`toml_table`), in that order."""

    toml_table: ClassVar[str]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file is named by a flag: the one init value a source needs before the others.
        config_file = getattr(init_settings, "init_kwargs", {}).get("config_file")
        return (init_settings, env_settings, TomlTable(settings_cls, config_file, cls.toml_table))


def given_flags(ctx: click.Context, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters the user typed on the command line (not click's defaults)."""
    return {
        name: value for name, value in params.items()
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }  # fmt: skip


def load(model: type[Settings], flags: Mapping[str, Any]) -> Settings:
    """The command's settings from its flags, the environment (`os.environ`, which the model's
    own source reads too) and its config file; one line (SettingsError) for anything unknown or
    malformed."""
    environ = os.environ
    prefix = str(model.model_config.get("env_prefix", environment.PREFIX))
    # A command whose variables are a family of their own (ZKCDC_REPLAY_*) checks that family.
    own = model.model_fields if prefix == environment.PREFIX else ()
    if (unknown := environment.unknown_variable(own, environ)) is not None:
        raise SettingsError(unknown)
    given = dict(flags)
    config_file = given.get("config_file")
    if config_file is None and (named := environ.get("ZKCDC_CONFIG_FILE")):
        given["config_file"] = config_file = Path(named)  # as by --config
    try:
        return model(**given)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "extra_forbidden":
            # A misspelt key must not quietly run the command without it.
            key = ".".join(str(p) for p in first["loc"])
            hint = environment.did_you_mean(key, model.model_fields)
            where = f" in {config_file}" if config_file is not None else ""
            raise SettingsError(f"unknown setting {key}{where}{hint}") from exc
        raise SettingsError(invalid_setting(exc)) from exc
