"""`zkcdc history`: the lake's tables asked through Spark SQL (streaming/lake/history_queries.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table as RichTable

from zkcdc.ground.cli_options import option_group
from zkcdc.ground.command_settings import given_flags
from zkcdc.history.history_settings import HistorySettings
from zkcdc.history.history_settings import load as load_settings
from zkcdc.history.state_at import state_at
from zkcdc.streaming.job.spark_session import session
from zkcdc.streaming.lake import history_queries as queries
from zkcdc.streaming.lake.lake_tables import LakeError
from zkcdc.streaming.lake.upkeep import RETAIN_HOURS, compact
from zkcdc.streaming.state.state_view import ClusterView, pick_cluster


@click.group("history")
def history_group() -> None:
    """The control plane's past, from the lake (`zkcdc stream history --lake`,
    `zkcdc replay LOG --lake`)."""


lake_options = option_group(
    click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
                 help="TOML settings: the [history] table (or the top level), under the "
                 "environment (ZKCDC_HISTORY_<SETTING>) and the flags [env ZKCDC_CONFIG_FILE]."),
    click.option("--lake", metavar="URI", help="The lake: a folder, or s3a://, abfss://, "
                 "hdfs:// ... as Spark's Hadoop is configured for."),
    click.option("--master", default="local[2]", show_default=True,
                 help="Spark master: local[N] or spark://HOST:PORT."),
    click.option("--driver-memory", default="1g", show_default=True,
                 help="The Spark driver's heap."),
    click.option("--cluster", help="Which cluster (needed when the lake holds several)."),
    click.option("--json", "json_lines", is_flag=True, help="Print JSON lines."),
)  # fmt: skip


def _settings(ctx: click.Context, params: dict[str, Any]) -> HistorySettings:
    s = load_settings(given_flags(ctx, params))
    if not s.lake:
        raise LakeError("give --lake URI (the lake `stream history` or `replay --lake` keeps)")
    return s


@contextlib.contextmanager
def _spark(s: HistorySettings) -> Iterator[Any]:
    """A lake session for one question, stopped once it is answered."""
    spark = session(s.master, "zkcdc-history-query", shuffle_partitions=2,
                    driver_memory=s.driver_memory, lake=True)  # fmt: skip
    try:
        yield spark
    finally:
        spark.stop()


def parse_time(value: str) -> int:
    """ISO 8601 (UTC unless it names a zone) or epoch milliseconds -> epoch milliseconds."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise LakeError(
            f"not a time: {value!r} (ISO 8601, e.g. 2026-12-01T10:00:00Z, or epoch ms)"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _time(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except LakeError as exc:
        raise click.BadParameter(str(exc)) from exc


@history_group.command("sql")
@click.argument("query")
@lake_options
@click.option("--as-of-version", type=click.IntRange(min=0),
              help="Read each table as of this version of its own (Delta time travel).")  # fmt: skip
@click.option("--limit", default=1000, show_default=True, help="Rows printed at most.")
@click.pass_context
def sql_command(ctx: click.Context, /, query: str, limit: int, **params: Any) -> None:
    """Run QUERY over the lake's tables, registered under their names (`changes`)."""
    s = _settings(ctx, params)
    with _spark(s) as spark:
        frame = queries.run_sql(spark, s.lake or "", query, s.as_of_version)
        columns = frame.columns
        rows = frame.limit(limit).collect()
        if s.json_lines:
            for row in rows:
                click.echo(json.dumps(row.asDict(recursive=True), default=str, sort_keys=True))
            return
        table = RichTable(*columns)
        for row in rows:
            table.add_row(*["" if v is None else str(v) for v in row])
        Console().print(table)


@history_group.command("timeline")
@click.argument("subject", nargs=-1, required=True)
@lake_options
@click.option("--since", callback=_time, help="From this time (ISO 8601 or epoch ms).")
@click.option("--until", callback=_time, help="Up to this time (ISO 8601 or epoch ms).")
@click.pass_context
def timeline_command(
    ctx: click.Context, /, subject: tuple[str, ...], since: int | None, until: int | None,
    **params: Any,
) -> None:  # fmt: skip
    """What changed for SUBJECT (TOPIC/PARTITION, `broker N` or `controller`), and its alerts
    firing and resolved, in time order."""
    s = _settings(ctx, params)
    what = queries.Subject.parse(subject)
    with _spark(s) as spark:
        entries = queries.timeline(spark, s.lake or "", what, since, until, s.cluster)
    for entry in entries:
        if s.json_lines:
            click.echo(json.dumps(entry.as_json(), sort_keys=True))
            continue
        fields = {k: v for k, v in entry.event.items() if k not in ("type", "topic", "partition")}
        details = " ".join(f"{k}={_text(v)}" for k, v in sorted(fields.items()))
        place = "alert" if entry.seq is None else f"seq {entry.seq}"
        click.echo(f"{queries.utc_text(entry.ts_ms)}  {entry.cluster}  {place}  "
                   f"{entry.event['type']}  {details}".rstrip())  # fmt: skip


@history_group.command("state")
@lake_options
@click.option("--at", "at", required=True, callback=_time,
              help="The moment (ISO 8601, UTC unless zoned, or epoch ms).")  # fmt: skip
@click.option("--limit", default=50, show_default=True, help="Partitions listed per table.")
@click.pass_context
def state_command(ctx: click.Context, /, at: int, limit: int, **params: Any) -> None:
    """The cluster as it was at a moment, rendered as `zkcdc state show` renders it."""
    s = _settings(ctx, params)
    with _spark(s) as spark:
        clusters = queries.clusters_in(spark, s.lake or "")
        name = pick_cluster(clusters, s.cluster, "the lake")
        latest = state_at(spark, s.lake or "", name, at)
    if s.json_lines:
        for _key, value in sorted(latest.items()):
            click.echo(json.dumps(value, sort_keys=True))
        return
    view = ClusterView.of(name, latest, limit)
    console = Console()
    console.print(f"{name} as of {queries.utc_text(at)}")
    console.print(view.summary())
    for table in view.tables():
        console.print(table)


@history_group.command("compact")
@lake_options
@click.option("--retain-hours", type=click.IntRange(min=0), default=RETAIN_HOURS,
              show_default=True, help="Keep the files of the table versions this recent "
              "(time travel reaches back as far); older unused files are removed.")  # fmt: skip
@click.pass_context
def compact_command(ctx: click.Context, /, retain_hours: int, **params: Any) -> None:
    """Rewrite each table's small files into few large ones (`changes` Z-ordered by topic and
    partition) and remove the files no retained version needs."""
    s = _settings(ctx, params)
    with _spark(s) as spark:
        done = compact(spark, s.lake or "", retain_hours)
    for t in done:
        if s.json_lines:
            click.echo(json.dumps({"table": t.table.value, "files_before": t.files_before,
                                   "files_after": t.files_after, "bytes": t.bytes_after}))  # fmt: skip
        else:
            click.echo(f"{t.table.value}: {t.files_before} -> {t.files_after} files "
                       f"({t.bytes_after / 2**20:.1f} MiB)")  # fmt: skip


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
