"""The `zkcdc` command line: one group, expected failures as one line on stderr and a non-zero exit."""

from __future__ import annotations

import sys
from typing import Any

import click

from zkcdc.capture.cli import capture, events
from zkcdc.ground import logs
from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.private_files import restrict_umask
from zkcdc.replay.cli import replay
from zkcdc.simulate.cli import simulate
from zkcdc.stack.cli import stack
from zkcdc.streaming.cli import state_group, stream
from zkcdc.view.cli import alerts_group, report_command, ui_command


class _Group(click.Group):
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


main.add_command(stack)
main.add_command(capture)
main.add_command(events)
main.add_command(simulate)
main.add_command(stream)
main.add_command(state_group)
main.add_command(replay)
main.add_command(ui_command)
main.add_command(report_command)
main.add_command(alerts_group)
