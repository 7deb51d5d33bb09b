"""The Avro contract can only grow: every schema in avro/ is a released version, FULL compatible
with every older release (fastavro reading real records both ways) and within the contract's own
rules; a breaking change to any of them fails here."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from zkcdc.ground.change_values import schema_fingerprint
from zkcdc.ground.schema_compatibility import contract_problems, full_problems, read_problems
from zkcdc.ground.schema_files import current_schema, released_versions, schema_dir

SCHEMAS = ["ChangeRecord", "Alert", "StateRecord", "EngineState"]


@pytest.mark.parametrize("name", SCHEMAS)
def test_the_schema_in_avro_is_its_newest_released_version(name: str) -> None:
    versions = released_versions(name)
    assert versions, f"avro/history/{name}/ holds no released version"
    numbers = [n for n, _ in versions]
    assert numbers == list(range(1, len(numbers) + 1)), f"versions of {name} skip: {numbers}"
    assert current_schema(name) == versions[-1][1], (
        f"avro/{name}.avsc differs from its newest release: copy it to "
        f"avro/history/{name}/v{len(numbers) + 1}.avsc (avro/README.md)"
    )


@pytest.mark.parametrize("name", SCHEMAS)
def test_each_release_is_full_compatible_with_every_older_one(name: str) -> None:
    versions = released_versions(name)
    for i, (newer_n, newer) in enumerate(versions):
        for older_n, older in versions[:i]:
            problems = full_problems(older, newer)
            assert problems == [], f"{name} v{newer_n} breaks v{older_n}: {problems}"


def test_every_change_record_ever_written_has_a_released_fingerprint() -> None:
    """Records written before versions were kept (no enum defaults) read as v1: defaults are not
    part of the fingerprint."""
    before = json.loads(json.dumps(released_versions("ChangeRecord")[0][1]))
    _drop_enum_defaults(before)
    assert schema_fingerprint(before) == schema_fingerprint(released_versions("ChangeRecord")[0][1])


def _drop_enum_defaults(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "enum":
            schema.pop("default", None)
        for value in schema.values():
            _drop_enum_defaults(value)
    elif isinstance(schema, list):
        for value in schema:
            _drop_enum_defaults(value)


def changed(edit: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    today = current_schema("ChangeRecord")
    new = copy.deepcopy(today)
    edit(new)
    return today, new


def field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in schema["fields"] if f["name"] == name)


def test_removing_a_field_is_rejected_even_one_with_a_default() -> None:
    today, new = changed(lambda s: s["fields"].remove(field(s, "zxid")))
    assert "field io.zkcdc.ChangeRecord.zxid removed" in " ".join(full_problems(today, new))


def test_removing_a_field_without_a_default_is_also_an_avro_resolution_failure() -> None:
    today, new = changed(lambda s: s["fields"].remove(field(s, "ts_ms")))
    assert read_problems(new, today), "old readers need ts_ms"


def test_adding_a_field_without_a_default_is_rejected() -> None:
    today, new = changed(lambda s: s["fields"].append({"name": "region", "type": "string"}))
    problems = full_problems(today, new)
    assert any("region added without a default" in p for p in problems), problems
    assert any("cannot read a record written with the older" in p for p in problems), problems


def test_adding_a_nested_field_without_a_default_is_rejected() -> None:
    def edit(s: dict[str, Any]) -> None:
        field(s, "source")["type"]["fields"].append({"name": "host", "type": "string"})

    today, new = changed(edit)
    assert any("Source.host added without a default" in p for p in full_problems(today, new))


def test_changing_a_field_type_is_rejected() -> None:
    today, new = changed(lambda s: field(s, "seq").update(type="int"))
    assert full_problems(today, new)


def test_a_new_symbol_in_an_enum_without_a_default_is_rejected() -> None:
    today, new = changed(lambda s: field(s, "op")["type"]["symbols"].append("TRUNCATE"))
    del field(today, "op")["type"]["default"]
    del field(new, "op")["type"]["default"]
    problems = full_problems(today, new)
    assert any("Op gains TRUNCATE" in p for p in problems), problems


def test_adding_an_optional_field_and_a_symbol_of_an_enum_with_a_default_is_compatible() -> None:
    def edit(s: dict[str, Any]) -> None:
        s["fields"].append({"name": "region", "type": ["null", "string"], "default": None})
        events = field(s, "events")["type"]["items"]
        field(events, "type")["type"]["symbols"].append("KRAFT_RECORD")

    today, new = changed(edit)
    assert full_problems(today, new) == []


def test_contract_rules_alone_catch_a_removed_enum_symbol_without_a_default() -> None:
    today, new = changed(lambda s: field(s, "op")["type"]["symbols"].remove("HEARTBEAT"))
    del field(new, "op")["type"]["default"]
    assert any("Op loses HEARTBEAT" in p for p in contract_problems(today, new))


def test_the_history_folder_holds_only_versions_and_the_readme_states_the_rules() -> None:
    readme = (schema_dir() / "README.md").read_text()
    for rule in ("with a default", "never removed", "fingerprint", "FULL_TRANSITIVE"):
        assert rule in readme, rule
    for folder in (schema_dir() / "history").iterdir():
        assert folder.name in SCHEMAS, folder
        assert all(f.suffix == ".avsc" and f.stem[0] == "v" for f in folder.iterdir())


def test_a_wheel_install_carries_every_schema_and_release() -> None:
    import tomllib

    root = schema_dir().parent
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    listed = {f for files in pyproject["tool"]["setuptools"]["data-files"].values() for f in files}
    on_disk = {str(p.relative_to(root)) for p in (root / "avro").rglob("*.avsc")}
    assert on_disk <= listed, f"add to [tool.setuptools.data-files]: {sorted(on_disk - listed)}"
