"""The Kafka connection options every command that talks to Kafka shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from zkcdc.ground import kafka_connection
from zkcdc.ground.cli_options import key_values, option_group


def _argv_pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
    pairs = key_values(ctx, param, values)
    try:
        kafka_connection.refuse_secrets_on_argv(pairs)
    except kafka_connection.KafkaConnectionError as exc:
        raise click.BadParameter(str(exc)) from exc
    return pairs


kafka_config_options = option_group(
    click.option(
        "--kafka-config-file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="librdkafka properties (security.protocol, sasl.*, ssl.*; secrets go here) "
        "[env ZKCDC_KAFKA_CONFIG_FILE].",
    ),
    click.option(
        "--kafka-config",
        multiple=True,
        callback=_argv_pairs,
        metavar="KEY=VALUE",
        help="A librdkafka property, repeatable; not for secrets (ZKCDC_KAFKA_SASL_PASSWORD...).",
    ),
)
