"""An event log written before the schema had versions (tests/fixtures/event_log_v1, by zkcdc
57c99f2) stays readable: `events cat` prints it, the rules make of it what that zkcdc made, and
so does a later zkcdc whose schema has grown. Every alert and state value the rules make of it
is valid under each released Alert and StateRecord schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from click.testing import CliRunner
from fastavro.validation import validate
from schema_versions import FIXTURES, golden, later_schema_dir

from zkcdc.capture.delivery.event_log import read_records
from zkcdc.cli import main
from zkcdc.ground.change_types import EventType
from zkcdc.ground.schema_files import current_schema, released_versions
from zkcdc.streaming.rules.alert_engine import AlertEngine
from zkcdc.streaming.rules.rule_settings import RuleSettings

LOG = FIXTURES / "event_log_v1"
RECORDS = json.loads((FIXTURES / "event_log_v1.json").read_text())["records"]


def cat_json(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["events", "cat", str(LOG), "--json", *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_events_cat_prints_every_record_of_the_kept_log() -> None:
    records = cat_json()
    assert [r["seq"] for r in records] == list(range(1, RECORDS + 1))
    types = {e["type"] for r in records for e in r["events"]}
    assert {
        EventType.BROKER_DEREGISTERED,
        EventType.LEADER_CHANGED,
        EventType.ISR_SHRUNK,
        EventType.OFFSET_COMMITTED,
    } <= types


def test_a_later_zkcdc_prints_the_kept_log_with_its_new_fields_at_their_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = later_schema_dir(tmp_path)
    monkeypatch.setenv("ZKCDC_SCHEMA_DIR", str(folder))
    assert [r["seq"] for r in cat_json()] == list(range(1, RECORDS + 1))
    records = list(read_records(LOG))
    assert len(records) == RECORDS and all(r["region"] is None for r in records)


def rules_over_the_log() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The alerts, and the last state value per key, of the rules over the kept log."""
    engine = AlertEngine("fixture", RuleSettings())
    alerts: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    for record in read_records(LOG):
        alerts += [a.as_json() for a in engine.process(record)]
        state.update(engine.take_state())
    return alerts, state


def test_the_rules_make_of_the_kept_log_what_the_zkcdc_that_wrote_it_made() -> None:
    alerts, state = rules_over_the_log()
    assert texts(alerts) == texts(golden("alerts"))
    # updated_ms is when the view was taken: per record here, per micro-batch in Spark.
    values = [v for v in state.values() if v is not None]
    assert texts(values, "updated_ms") == texts(golden("state"), "updated_ms")


def texts(values: list[dict[str, Any]], *leave_out: str) -> list[str]:
    return sorted(
        json.dumps({k: v for k, v in value.items() if k not in leave_out}, sort_keys=True)
        for value in values
    )


@pytest.mark.parametrize("name", ["Alert", "StateRecord"])
def test_every_alert_and_state_value_is_valid_under_each_release_of_its_schema(name: str) -> None:
    alerts, state = rules_over_the_log()
    values = alerts if name == "Alert" else [v for v in state.values() if v is not None]
    kinds = {v["rule"] if name == "Alert" else v["kind"] for v in values}
    assert len(kinds) >= (10 if name == "Alert" else 4), kinds
    for number, schema in [*released_versions(name), (0, current_schema(name))]:
        parsed = fastavro.parse_schema(schema, named_schemas={})
        for value in values:
            assert validate(value, parsed, raise_errors=False, strict=True), (
                f"not a valid {name} (v{number or 'current'}): {value}"
            )
