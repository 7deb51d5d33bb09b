"""The event log's readers build what they need from the current schema once a process, and a
later schema (ZKCDC_SCHEMA_DIR pointed at a later release) gets its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from schema_versions import later_schema_dir

from zkcdc.capture.delivery.event_log import EventLogWriter, read_records, read_spans, scan_blocks
from zkcdc.capture.encoding import compiled_schema
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.ground.change_types import Op


def _log(folder: Path, records: int = 3) -> Path:
    writer = EventLogWriter(folder, "c1", now=lambda: 0.0)
    writer.append([
        ChangeRecord("c1", seq, Op.UPDATE, "/a", None, Znode(b"x", seq, 1, seq), seq, seq, seq)
        .to_avro()
        for seq in range(1, records + 1)
    ])  # fmt: skip
    writer.close()
    return folder


def test_reading_a_log_again_compiles_nothing_again(tmp_path: Path) -> None:
    log = _log(tmp_path / "log")
    scan_blocks(log)  # each built once, if not before
    list(read_spans(log, lambda d: None))
    splitters, encoders = (
        compiled_schema.splitter.cache_info().misses,
        compiled_schema.sized_encoder.cache_info().misses,
    )
    for _ in range(3):
        assert scan_blocks(log).records == 3
        assert sum(len(spans) for spans in read_spans(log, lambda d: None)) == 3
        assert [r["seq"] for r in read_records(log)] == [1, 2, 3]
    assert compiled_schema.splitter.cache_info().misses == splitters
    assert compiled_schema.sized_encoder.cache_info().misses == encoders


def test_a_later_schema_is_read_with_its_own_compiled_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _log(tmp_path / "log")
    assert "region" not in next(iter(read_records(log)))
    folder, _ = later_schema_dir(tmp_path)
    monkeypatch.setenv("ZKCDC_SCHEMA_DIR", str(folder))
    # The log's records, written with today's schema, read into the later one: its new field
    # at its default.
    assert [r["region"] for r in read_records(log)] == [None, None, None]
    # Spans in the later schema: the blocks, of another schema now, decoded and encoded again.
    assert sum(len(spans) for spans in read_spans(log, lambda d: None)) == 3
    assert scan_blocks(log).records == 3
