"""Event log files (rotation, names in seq order, torn blocks) and the single-object encoding."""

from __future__ import annotations

import json

import fastavro
import pytest

from zkcdc.capture.delivery.event_log import EventLogWriter, file_name, log_files, read_records
from zkcdc.capture.encoding.avro_codec import CodecError, SingleObjectCodec
from zkcdc.capture.records import ChangeRecord, Znode
from zkcdc.ground.change_types import Op


def record(seq: int, path: str = "/x") -> dict:
    return ChangeRecord(
        "c1", seq, Op.UPDATE, path, None, Znode(b"v", 1, 2, 3, 4, 5, 0), 3, 5, 6
    ).to_avro()


def test_single_object_values_carry_the_marker_and_the_schema_fingerprint():
    codec = SingleObjectCodec()
    value = codec.encode(record(1))
    schema_text = fastavro.schema.to_parsing_canonical_form(codec.schema)
    fingerprint = fastavro.schema.fingerprint(schema_text, "CRC-64-AVRO")
    assert value[:2] == b"\xc3\x01" and value[2:10].hex() == fingerprint
    assert codec.decode(value) == record(1)
    with pytest.raises(CodecError, match="fingerprint"):
        codec.decode(value[:2] + b"\x00" * 8 + value[10:])
    with pytest.raises(CodecError, match="C3 01"):
        codec.decode(b"{}")


def test_files_rotate_by_size_and_age_and_list_in_seq_order(tmp_path):
    now = [0.0]
    writer = EventLogWriter(tmp_path, "c1", max_bytes=2048, max_age_s=60, now=lambda: now[0])
    seq = 0
    for _ in range(30):
        seq += 1
        writer.append([record(seq, "/p" * 40)])
    now[0] = 100.0
    writer.append([record(seq + 1)])
    writer.close()
    files = log_files(tmp_path)
    assert len(files) >= 3
    assert files[0].name == file_name("c1", 1) == "c1.00000000000000000001.avro"
    assert [r["seq"] for r in read_records(tmp_path)] == list(range(1, seq + 2))
    # A plain fastavro reader reads every file on its own.
    with files[-1].open("rb") as stream:
        assert [r["seq"] for r in fastavro.reader(stream)] == [seq + 1]


def test_a_torn_last_block_is_reported_with_its_file_and_the_rest_still_read(tmp_path):
    writer = EventLogWriter(tmp_path, "c1", now=lambda: 0.0)
    writer.append([record(1), record(2)])
    writer.append([record(3)])
    writer.close()
    (file,) = log_files(tmp_path)
    file.write_bytes(file.read_bytes()[:-20])
    damage = []
    seqs = [r["seq"] for r in read_records(tmp_path, damage.append)]
    assert seqs == [1, 2]
    assert damage and damage[0].file == file


def test_events_cat_prints_json_lines_and_fails_cleanly_on_a_missing_log(tmp_path):
    from click.testing import CliRunner

    from zkcdc.cli import main

    writer = EventLogWriter(tmp_path, "c1", now=lambda: 0.0)
    writer.append([record(1), record(2)])
    writer.close()
    result = CliRunner().invoke(main, ["events", "cat", "--json", str(tmp_path)])
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [line["seq"] for line in lines] == [1, 2] and lines[0]["after"]["data"] == "v"
    result = CliRunner().invoke(main, ["events", "cat", str(tmp_path / "nothing")])
    assert result.exit_code != 0 and "Traceback" not in result.output
