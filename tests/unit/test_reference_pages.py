"""The generated reference covers the code: every command and flag, every setting and
environment variable, every event type, alert rule and metric has its entry, with words that
say what it is. Each registry is walked here on its own, not through the generator's lists."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click
import pytest
from prometheus_client.metrics import MetricWrapperBase

from zkcdc.capture.metrics import CaptureMetrics
from zkcdc.capture.settings import CaptureSettings
from zkcdc.cli import COMMANDS, main
from zkcdc.ground.change_types import EventType
from zkcdc.ground.environment import FAMILIES, SHARED
from zkcdc.history.history_settings import HistorySettings
from zkcdc.replay.replay_settings import ReplaySettings
from zkcdc.stack.settings import StackSettings
from zkcdc.streaming.job.job_metrics import JobMetrics
from zkcdc.streaming.rules.rule_catalog import RULES
from zkcdc.streaming.rules.rule_settings import RuleSettings
from zkcdc.streaming.stream_settings import StreamSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import reference_pages

PAGES = reference_pages.pages()


def section(page: str, heading: str) -> str:
    """The text under `heading` up to the next heading of its level or above."""
    text = PAGES[page]
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    rest = text[start + len(heading) + 2 :]
    end = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.M)
    return rest[: end.start()] if end else rest


def leaf_commands() -> list[tuple[str, click.Command]]:
    out = []
    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        stack = [(f"zkcdc {name}", command)]
        while stack:
            path, cmd = stack.pop()
            if isinstance(cmd, click.Group):
                stack += [(f"{path} {n}", c) for n, c in cmd.commands.items()]
            else:
                out.append((path, cmd))
    return out


@pytest.mark.parametrize(("path", "command"), leaf_commands(), ids=lambda v: str(v))
def test_every_command_and_each_of_its_flags_has_an_entry_that_says_what_it_does(
    path: str, command: click.Command
) -> None:
    text = section("reference/commands.md", f"## {path}")
    assert command.help, f"{path} has no help"
    for param in command.params:
        if param.name == "help":
            continue
        names = [*param.opts, *getattr(param, "secondary_opts", [])]
        if isinstance(param, click.Argument):
            names = [param.human_readable_name]
        for name in names:
            assert f"`{name}`" in text, f"{path}: {name} has no entry"
        if isinstance(param, click.Option):
            assert param.help, f"{path}: {param.opts[0]} has no help"


@pytest.mark.parametrize(
    ("title", "model", "prefix"),
    [("zkcdc capture", CaptureSettings, "ZKCDC_"), ("zkcdc stack", StackSettings, "ZKCDC_STACK_"),
     ("zkcdc stream alerts, zkcdc stream state, zkcdc stream history", StreamSettings, "ZKCDC_"),
     ("zkcdc replay", ReplaySettings, "ZKCDC_REPLAY_"),
     ("zkcdc history", HistorySettings, "ZKCDC_HISTORY_"),
     ("Alert rules", RuleSettings, None)],
)  # fmt: skip
def test_every_setting_has_an_entry_with_its_variable_and_what_it_is(
    title: str, model: type, prefix: str | None
) -> None:
    text = section("reference/settings.md", f"## {title}")
    rows = {
        line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")
    }
    for field in model.model_fields:  # type: ignore[attr-defined]
        row = rows.get(f"`{field}`")
        assert row is not None, f"{title}: {field} has no entry"
        if prefix:
            assert f"`{prefix}{field.upper()}`" in row
        assert row.rstrip(" |").rsplit("|", 1)[1].strip(), f"{title}: {field} says nothing"


def test_every_variable_every_command_reads_has_an_entry() -> None:
    text = section("reference/settings.md", "## Read by every command")
    for name in [*SHARED, *(f"{family}*" for family in FAMILIES)]:
        assert f"`{name}`" in text


def test_every_event_type_has_an_entry_documented_where_the_enum_defines_it() -> None:
    for member in EventType:
        text = section("reference/event-types.md", f"## {member.value}")
        assert len(text.strip()) > 20, f"{member.value} says nothing"


def test_every_rule_has_an_entry_and_every_rule_setting_belongs_to_a_rule() -> None:
    for rule in RULES:
        text = section("reference/rules.md", f"## {rule.id}")
        assert rule.severity.value in text
        for name in rule.settings:
            assert f"`{name}`" in text
    tuned = {name for rule in RULES for name in rule.settings}
    assert tuned == set(RuleSettings.model_fields), set(RuleSettings.model_fields) ^ tuned


@pytest.mark.parametrize(
    ("command", "metrics"),
    [("zkcdc capture", CaptureMetrics()), ("zkcdc stream alerts", JobMetrics())],
    ids=["capture", "alerts"],
)
def test_every_metric_has_an_entry(command: str, metrics: object) -> None:
    text = section("reference/metrics.md", f"## {command}")
    wrappers = [v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase)]
    assert wrappers
    for metric in wrappers:
        assert f"`{metric._name}" in text, f"{metric._name} has no entry"


def test_the_records_page_has_every_field_of_the_change_record_and_the_alert() -> None:
    import json

    for name in ("ChangeRecord", "Alert"):
        schema = json.loads(
            (Path(__file__).resolve().parents[2] / "avro" / f"{name}.avsc").read_text()
        )
        text = section("reference/records.md", f"## {name}")
        for field in schema["fields"]:
            assert f"| `{field['name']}` |" in text
