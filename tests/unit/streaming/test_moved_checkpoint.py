"""A checkpoint of the sharded layout, moved to another folder, names its state schema files
where they are now (the kept fixture was written in /tmp/ckfix)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from zkcdc.streaming.job.moved_checkpoint import repoint_state_schemas

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoint_v1"


def _schema_paths(query: Path) -> list[str]:
    found = []
    for metadata in sorted(query.glob("state/*/_metadata/v2/[0-9]*")):
        content = json.loads(metadata.read_text().partition("\n")[2])
        found += [p for store in content["stateStoreInfo"] for p in store["stateSchemaFilePaths"]]
    return found


def test_a_moved_checkpoint_names_its_own_schema_files_and_nothing_else_changes(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "moved"
    shutil.copytree(FIXTURE / "shards-2", checkpoint)
    query = checkpoint / "alerts"
    metadata = query / "state" / "0" / "_metadata" / "v2" / "0"
    before = metadata.read_text()
    assert not any(Path(p.removeprefix("file:")).exists() for p in _schema_paths(query))

    assert repoint_state_schemas(query) == [metadata]

    paths = _schema_paths(query)
    assert paths and all(p.startswith(f"file:{query}/state/0/_stateSchema/") for p in paths)
    assert all(Path(p.removeprefix("file:")).is_file() for p in paths)
    old, new = (json.loads(t.partition("\n")[2]) for t in (before, metadata.read_text()))
    for store in old["stateStoreInfo"]:
        store["stateSchemaFilePaths"] = paths
    assert new == old and metadata.read_text().startswith("v2\n")
    assert not (metadata.parent / ".0.crc").exists()
    assert repoint_state_schemas(query) == []  # a second start changes nothing


def test_paths_that_resolve_or_have_no_copy_here_and_the_one_group_layout_are_left(
    tmp_path: Path,
) -> None:
    one_group = tmp_path / "one-group"
    shutil.copytree(FIXTURE / "one-group", one_group)
    assert repoint_state_schemas(one_group / "alerts") == []

    checkpoint = tmp_path / "no-copy"
    shutil.copytree(FIXTURE / "shards-2", checkpoint)
    shutil.rmtree(checkpoint / "alerts" / "state" / "0" / "_stateSchema")
    metadata = checkpoint / "alerts" / "state" / "0" / "_metadata" / "v2" / "0"
    before = metadata.read_text()
    assert repoint_state_schemas(checkpoint / "alerts") == []
    assert metadata.read_text() == before  # Spark then says what it misses


def test_metadata_that_is_not_json_is_left_for_spark_to_refuse(tmp_path: Path) -> None:
    metadata = tmp_path / "alerts" / "state" / "0" / "_metadata" / "v2" / "0"
    metadata.parent.mkdir(parents=True)
    metadata.write_text("v2\n{not json")
    assert repoint_state_schemas(tmp_path / "alerts") == []
    assert metadata.read_text() == "v2\n{not json"
