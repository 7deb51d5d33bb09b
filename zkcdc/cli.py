"""The `zkcdc` command line: one group, expected failures as one line on stderr and a non-zero exit."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from zkcdc.ground import logs
from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.private_files import restrict_umask

# Each command's module is imported when that command runs, not all of them on every start:
# `zkcdc capture` imported the Spark job's, the stack's and the web view's modules too, ~0.6 s
# of CPU at each start (the test suite starts some 500 commands).
COMMANDS: dict[str, tuple[str, str]] = {
    "stack": ("zkcdc.stack.cli", "stack"),
    "capture": ("zkcdc.capture.cli", "capture"),
    "events": ("zkcdc.capture.cli", "events"),
    "simulate": ("zkcdc.simulate.cli", "simulate"),
    "stream": ("zkcdc.streaming.cli", "stream"),
    "state": ("zkcdc.streaming.cli", "state_group"),
    "replay": ("zkcdc.replay.cli", "replay"),
    "history": ("zkcdc.history.cli", "history_group"),
    "ui": ("zkcdc.view.cli", "ui_command"),
    "report": ("zkcdc.view.cli", "report_command"),
    "alerts": ("zkcdc.view.cli", "alerts_group"),
}


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, name = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ZkcdcError as exc:
            click.echo(f"zkcdc: error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("zkcdc: interrupted", err=True)
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="zkcdc")
def main() -> None:
    """Change-data-capture for Kafka's ZooKeeper control plane."""
    restrict_umask()  # event logs, checkpoints, alert files: never world-readable
    logs.configure()  # every command's log lines as JSON on stderr: stdout is its output
