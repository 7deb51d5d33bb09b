"""Pieces every zkcdc command line shares: KEY=VALUE options and one-line settings errors."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError


def option_group(*options: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Several click options as one decorator, applied in the order given (as if stacked)."""

    def apply(func: Any) -> Any:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def key_values(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """Click callback for a repeatable `KEY=VALUE` option."""
    parsed = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        parsed[key] = value
    return parsed


def jvm_memory(_: click.Context, __: click.Parameter, value: str) -> str:
    """Click callback for a JVM memory size as Java takes it (512m, 2g, 1536M)."""
    if not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", value):
        raise click.BadParameter(f"expected a size such as 512m or 2g, got {value!r}")
    return value.lower()


def rule_overrides_option(help: str) -> Callable[[Any], Any]:
    """The repeatable `--rule NAME=VALUE` of every command that runs or judges the alert rules."""
    return click.option(
        "--rule", "rules", multiple=True, callback=key_values, metavar="NAME=VALUE", help=help
    )


class ShardsParam(click.ParamType[int | None]):
    """`auto` (None: the job picks, streaming/job/checkpoint_layout.py) or a count 0..256."""

    name = "auto|N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, int):
            return value
        if str(value).lower() == "auto":
            return None
        try:
            count = int(value)
        except ValueError:
            self.fail(f"expected auto or a number of shards, got {value!r}", param, ctx)
        if not 0 <= count <= 256:
            self.fail(f"{count} is not in 0..256", param, ctx)
        return count


def shards_option(help: str) -> Callable[[Any], Any]:
    """The `--shards auto|N` of every command that runs the alert job: the layout of its state."""
    return click.option(
        "--shards", type=ShardsParam(), default="auto", show_default=True, help=help
    )


def invalid_setting(exc: ValidationError) -> str:
    """The first problem of a settings object, as the one line the user sees."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    return f"invalid setting {where}: {message}" if where else f"invalid setting {message}"


def output_file(_: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback for a file the command writes: its folder is made if missing, and a path
    that cannot be written is refused at once, before any work, in one line."""
    if value is None:
        return value
    path = Path(value)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise click.BadParameter(f"cannot make {path.parent}: {exc.strerror}") from exc
    if path.is_dir():
        raise click.BadParameter(f"{path} is a folder")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise click.BadParameter(f"{path} cannot be written (permissions)")
    return path
