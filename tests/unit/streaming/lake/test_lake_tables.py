"""Where a lake is and whether it can be written, before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkcdc.streaming.lake.lake_tables import LakeError, Table, check_local_lake, lake_uri, table_uri
from zkcdc.streaming.lake.table_writer import query_app_id


def test_a_local_path_is_made_absolute_and_other_file_systems_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert lake_uri("lake") == str(tmp_path / "lake")
    assert lake_uri(f"file:{tmp_path}/lake") == str(tmp_path / "lake")
    assert lake_uri("s3a://bucket/zkcdc/") == "s3a://bucket/zkcdc"
    assert table_uri("s3a://bucket/zkcdc", Table.CHANGES) == "s3a://bucket/zkcdc/changes"


def test_a_local_lake_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(LakeError, match=r"^cannot write the lake at .*/file/lake: "):
        check_local_lake(str(tmp_path / "file" / "lake"))
    check_local_lake(str(tmp_path / "new" / "lake"))  # made
    assert (tmp_path / "new" / "lake").is_dir()
    assert list((tmp_path / "new" / "lake").iterdir()) == []  # the probe is gone
    check_local_lake("s3a://bucket/lake")  # another file system: checked by Spark


def test_the_writers_application_id_is_the_checkpoints() -> None:
    assert query_app_id("/a/checkpoint") == query_app_id("/a/checkpoint")
    assert query_app_id("/a/checkpoint") != query_app_id("/b/checkpoint")
