"""The reference pages of the documentation site, generated from the code so they cannot drift:
every command and flag (click's tree), every setting and environment variable (the settings
models and `ground/environment.py`), the records (the `.avsc` files), every event type (the
enum, each member's comment), every alert rule (the rule catalog) and every metric (the
metrics registries).

`pages()` gives each page's markdown by its path under docs/; the site's build hook
(tools/mkdocs_hooks.py) adds them, and tests/unit/test_reference_pages.py checks that every
entry of every registry has its place."""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, SecretStr

GENERATED = "<!-- generated from the code by tools/reference_pages.py: edit the code, not this -->"


# -- what the registries hold -----------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    path: str  # "zkcdc stream alerts"
    command: click.Command


def commands() -> list[Command]:
    """Every command that runs something, depth first, in the order `--help` lists them."""
    from zkcdc.cli import main

    def walk(command: click.Command, path: str, ctx: click.Context) -> Iterator[Command]:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    yield from walk(sub, f"{path} {name}", click.Context(sub, parent=ctx))
        else:
            yield Command(path, command)

    return list(walk(main, "zkcdc", click.Context(main)))


@dataclass(frozen=True)
class SettingsModel:
    title: str
    model: type[BaseModel]
    env_prefix: str | None  # None: not read from the environment
    how: str  # how a user gives one, beside the environment
    command: str | None = None  # the command whose flag of the same name says what a field is


def settings_models() -> list[SettingsModel]:
    from zkcdc.capture.settings import CaptureSettings
    from zkcdc.history.history_settings import HistorySettings
    from zkcdc.replay.replay_settings import ReplaySettings
    from zkcdc.stack.settings import StackSettings
    from zkcdc.streaming.rules.rule_settings import RuleSettings
    from zkcdc.streaming.stream_settings import StreamSettings

    return [
        SettingsModel(
            "zkcdc capture", CaptureSettings, "ZKCDC_",
            "a flag (`--zookeeper`), a variable (`ZKCDC_ZOOKEEPER`) or a key of the TOML "
            "file's `[capture]` table (`zookeeper = ...`); flags win over the environment, "
            "which wins over the file. An unknown key or variable is refused in one line.",
            "zkcdc capture",
        ),
        SettingsModel(
            "zkcdc stream alerts, zkcdc stream state, zkcdc stream history", StreamSettings,
            "ZKCDC_",
            "a flag (`--alerts-topic`), a variable (`ZKCDC_ALERTS_TOPIC`) or a key of the TOML "
            "file's `[stream]` table (`alerts-topic = ...`); flags win over the environment, "
            "which wins over the file. An unknown key or variable is refused in one line.",
            "zkcdc stream alerts",
        ),
        SettingsModel(
            "zkcdc replay", ReplaySettings, "ZKCDC_REPLAY_",
            "a flag (`--master`), a variable of replay's own (`ZKCDC_REPLAY_MASTER`: a one-off "
            "replay must not take a daemon's `ZKCDC_CHECKPOINT`) or a key of the TOML file's "
            "`[replay]` table; flags win over the environment, which wins over the file.",
            "zkcdc replay",
        ),
        SettingsModel(
            "zkcdc history", HistorySettings, "ZKCDC_HISTORY_",
            "a flag (`--lake`), a variable of its own (`ZKCDC_HISTORY_LAKE`: a question to the "
            "lake must not take a job's `ZKCDC_MASTER`) or a key of the TOML file's `[history]` "
            "table; flags win over the environment, which wins over the file.",
            "zkcdc history sql",
        ),
        SettingsModel(
            "zkcdc stack", StackSettings, "ZKCDC_STACK_",
            "a flag of `zkcdc stack up` where it has one, or a variable (`ZKCDC_STACK_BROKERS=5`); "
            "an unknown `ZKCDC_STACK_*` variable is refused in one line.",
            "zkcdc stack up",
        ),
        SettingsModel(
            "Alert rules", RuleSettings, None,
            "`--rule NAME=VALUE` of `zkcdc stream alerts`, `stream state` and `replay` "
            "(repeatable), e.g. `--rule under_replicated_for_ms=2000`.",
        ),
    ]  # fmt: skip


def metric_registries() -> dict[str, CollectorRegistry]:
    from zkcdc.capture.metrics import CaptureMetrics
    from zkcdc.streaming.job.job_metrics import JobMetrics

    return {
        "zkcdc capture": CaptureMetrics().registry,
        "zkcdc stream alerts": JobMetrics().registry,
    }


# -- comments as documentation ----------------------------------------------------------------


def member_comments(cls: type) -> dict[str, str]:
    """Each class attribute's documentation as written in its class: the comment lines right
    above it and a comment at the end of its line (for a pydantic field, its `description`
    first)."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    trailing: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and lines[token.start[0] - 1].strip() != token.string:
            trailing[token.start[0]] = token.string.lstrip("#").strip()
    [classdef] = ast.parse(source).body
    assert isinstance(classdef, ast.ClassDef)
    out: dict[str, str] = {}
    for node in classdef.body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        above: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#"):
            above.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        after = [trailing[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                 if n in trailing and "fmt:" not in trailing[n]]  # fmt: skip
        out[target.id] = " ".join(above + after)
    return out


def field_docs(model: type[BaseModel], command: str | None = None) -> dict[str, str]:
    """Each field's documentation: its description and comments, else the help of the flag
    that sets it, else what its name says of a rule's durations."""
    comments = member_comments(model)
    flags = _flag_help(command) if command else {}
    out = {}
    for name, field in model.model_fields.items():
        text = " ".join(p for p in (field.description, comments.get(name, "")) if p)
        out[name] = text or flags.get(name) or _rule_duration(name)
    return out


def _flag_help(path: str) -> dict[str, str]:
    [command] = [c.command for c in commands() if c.path == path]
    return {p.name: p.help for p in command.params
            if isinstance(p, click.Option) and p.name and p.help}  # fmt: skip


def _rule_duration(name: str) -> str:
    for suffix, text in (
        ("_for_ms", "How long (event time, ms) the condition holds before the alert fires."),
        ("_window_ms", "The window (event time, ms) the changes are counted in."),
    ):
        if name.endswith(suffix):
            return text
    return ""


# -- pages ------------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _anchor(text: str) -> str:
    return text.lower().replace(" ", "-")


def _default(value: Any) -> str:
    unset = type(value).__name__ == "Sentinel"  # click's "no default given"
    if unset or value is None or value == () or value == "" or value is False:
        return ""
    if isinstance(value, SecretStr):
        return "(secret)"
    return f"`{value}`"


def _option_row(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        name = f"`{param.human_readable_name}`"
        text = "argument" + (" (repeatable)" if param.nargs == -1 else "")
        return f"| {name} | {text} | |"
    assert isinstance(param, click.Option)
    flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    kind = "flag" if param.is_flag else (param.metavar or param.type.name.upper())
    if param.multiple:
        kind += " (repeatable)"
    default = "" if param.is_flag or callable(param.default) else _default(param.default)
    text = _cell(param.help or "")
    return f"| {flags} | {_cell(kind)} | {text}{' Default: ' + default if default else ''} |"


def commands_page() -> str:
    out = [GENERATED, "# Commands", "",
           "Every `zkcdc` command and its flags, as `zkcdc COMMAND --help` gives them. Bad "
           "input gets one line on stderr (`zkcdc: error: ...`) and a non-zero exit.", ""]  # fmt: skip
    for entry in commands():
        command = entry.command
        out += [f"## {entry.path}", ""]
        if command.help:
            out += [inspect.cleandoc(command.help).replace("\b\n", ""), ""]
        params = [p for p in command.params if p.name != "help"]
        if params:
            out += ["| flag | value | |", "|---|---|---|", *map(_option_row, params), ""]
    return "\n".join(out)


def settings_page() -> str:
    from zkcdc.ground.environment import FAMILIES, SHARED

    out = [GENERATED, "# Settings and environment", "",
           "Every setting a command reads, with its default. Secrets (passwords, keys) are "
           "given in the environment or in files, never on a command line, and are never "
           "logged.", "", "## Read by every command", "", "| variable | |", "|---|---|"]  # fmt: skip
    out += [f"| `{name}` | {_cell(text)} |" for name, text in sorted(SHARED.items())]
    out += [f"| `{name}*` | {_cell(text)} |" for name, text in FAMILIES.items()]
    out.append("")
    for entry in settings_models():
        docs = field_docs(entry.model, entry.command)
        out += [f"## {entry.title}", "", f"Given as {entry.how}", ""]
        head = "| key | variable | default | |" if entry.env_prefix else "| name | default | |"
        out += [head, "|---|---|---|---|" if entry.env_prefix else "|---|---|---|"]
        for name, field in entry.model.model_fields.items():
            default = "" if field.default_factory else _default(field.default)
            row = [f"`{name}`"]
            if entry.env_prefix:
                row.append(f"`{entry.env_prefix}{name.upper()}`")
            out.append("| " + " | ".join([*row, default, _cell(docs[name])]) + " |")
        out.append("")
    return "\n".join(out)


def _type_text(schema: Any, named: set[str]) -> str:
    if isinstance(schema, str):
        return f"[{schema}](#{schema.lower()})" if schema in named else schema
    if isinstance(schema, list):
        kinds = [_type_text(s, named) for s in schema if s != "null"]
        return " or ".join(kinds) + (" or null" if "null" in schema else "")
    kind = schema["type"]
    if kind == "array":
        return f"array of {_type_text(schema['items'], named)}"
    if kind == "map":
        return f"map of {_type_text(schema['values'], named)}"
    if kind == "enum":
        return f"enum {schema['name']}: " + ", ".join(schema["symbols"])
    if kind == "record":
        return f"[{schema['name']}](#{schema['name'].lower()})"
    return _type_text(kind, named) if isinstance(kind, str) else str(kind)


def _records(schema: Any) -> Iterator[dict[str, Any]]:
    """Every record a schema defines, outermost first."""
    if isinstance(schema, list):
        for s in schema:
            yield from _records(s)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            yield schema
            for f in schema["fields"]:
                yield from _records(f["type"])
        elif schema.get("type") in ("array", "map"):
            yield from _records(schema.get("items") or schema.get("values"))


RECORD_SCHEMAS = {
    "ChangeRecord": "A change record: one change of a znode or of the KRaft metadata, on the "
    "changes topic (Avro, the Confluent wire format with a schema registry) and in event "
    "logs (Avro object container files). `zkcdc events cat --json` prints the same names.",
    "Alert": "An alert: JSON text of this record on the alerts topic, in `--alerts-out` and "
    "on the console.",
    "StateRecord": "A value of the compacted state topic: one record per entity, its `kind` "
    "saying which.",
}


def records_page() -> str:
    from zkcdc.ground.schema_files import current_schema

    out = [GENERATED, "# Records", "",
           "The records zkcdc gives out, from the schemas in `avro/` (how they may change: "
           "`avro/README.md`). A field added later has a default, so old and new readers "
           "read both.", ""]  # fmt: skip
    for name, text in RECORD_SCHEMAS.items():
        schema = current_schema(name)
        records = list(_records(schema))
        named = {r["name"] for r in records}
        out += [f"## {name}", "", text, ""]
        for record in records:
            if record is not schema:
                out += [f"### {record['name']}", ""]
            if record.get("doc"):
                out += [_cell(record["doc"]), ""]
            out += ["| field | type | |", "|---|---|---|"]
            for f in record["fields"]:
                kind = _cell(_type_text(f["type"], named))
                out.append(f"| `{f['name']}` | {kind} | {_cell(f.get('doc', ''))} |")
            out.append("")
    return "\n".join(out)


def event_types_page() -> str:
    from zkcdc.ground.change_types import EventType

    docs = member_comments(EventType)
    out = [GENERATED, "# Event types", "", inspect.cleandoc(EventType.__doc__ or ""), "",
           "An unknown type read by an older consumer reads as `UNKNOWN_ZNODE` (the enum's "
           "default).", ""]  # fmt: skip
    for member in EventType:
        out += [f"## {member.value}", "", docs[member.name], ""]
    return "\n".join(out)


def rules_page() -> str:
    from zkcdc.streaming.rules.rule_catalog import RULES
    from zkcdc.streaming.rules.rule_settings import RuleSettings

    defaults = RuleSettings()
    docs = field_docs(RuleSettings)
    out = [GENERATED, "# Alert rules", "",
           "Alerts are computed in event time (ZooKeeper's clock, moved on by capture's "
           "heartbeats): a replay at any speed gives the alerts the live job gave. A "
           "FIRING and its RESOLVED share one `alert_id` (rule, entity, start).", "",
           "| rule | severity | entity | decides by |", "|---|---|---|---|"]  # fmt: skip
    out += [f"| [`{r.id}`](#{r.id}) | {r.severity.value} | `{r.entity}` | {r.decision.value} |"
            for r in RULES]  # fmt: skip
    out.append("")
    for rule in RULES:
        out += [f"## {rule.id}", "", f"**{rule.severity.value}**, about `{rule.entity}`: "
                f"FIRING when {rule.fires_when}.", "", "| setting | default | |", "|---|---|---|"]  # fmt: skip
        for name in rule.settings:
            out.append(f"| `{name}` | `{getattr(defaults, name)}` | {_cell(docs[name])} |")
        out.append("")
    return "\n".join(out)


def metrics_page() -> str:
    out = [GENERATED, "# Metrics", "",
           "Prometheus metrics, served with `--metrics-port` (`/metrics`, and `/healthz`).",
           ""]  # fmt: skip
    for command, registry in metric_registries().items():
        out += [f"## {command}", "", "| metric | type | labels | |", "|---|---|---|---|"]
        for name, kind, labels, text in metric_entries(registry):
            out.append(f"| `{name}` | {kind} | {', '.join(labels)} | {_cell(text)} |")
        out.append("")
    return "\n".join(out)


def metric_entries(registry: CollectorRegistry) -> list[tuple[str, str, tuple[str, ...], str]]:
    """(name as exposed, type, label names, help) of every metric in a registry."""
    out = []
    for collector in registry._collector_to_names:  # prometheus_client lists them nowhere else
        labels = tuple(getattr(collector, "_labelnames", ()))
        # Every metric zkcdc registers is a prometheus_client metric, which describes itself.
        for family in collector.describe():  # type: ignore[attr-defined]
            name = family.name + ("_total" if family.type == "counter" else "")
            out.append((name, family.type, labels, family.documentation))
    return sorted(out)


def pages() -> dict[str, str]:
    """Each generated page's markdown, by its path under docs/."""
    return {
        "reference/commands.md": commands_page(),
        "reference/settings.md": settings_page(),
        "reference/records.md": records_page(),
        "reference/event-types.md": event_types_page(),
        "reference/rules.md": rules_page(),
        "reference/metrics.md": metrics_page(),
    }


if __name__ == "__main__":  # a page to read without the site: python tools/reference_pages.py
    import sys

    print(pages()[sys.argv[1] if len(sys.argv) > 1 else "reference/commands.md"])
