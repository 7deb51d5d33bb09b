"""Pieces every zkcdc command line shares: KEY=VALUE options and one-line settings errors."""

from __future__ import annotations

import click
from pydantic import ValidationError


def key_values(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """Click callback for a repeatable `KEY=VALUE` option."""
    parsed = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        parsed[key] = value
    return parsed


def invalid_setting(exc: ValidationError) -> str:
    """The first problem of a settings object, as the one line the user sees."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"invalid setting {where}: {first['msg']}"
