"""Values of either wire form and of any released schema version read as the schema this zkcdc
holds; anything else is one ValueDecodeError, never another exception."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_versions import later_schema_dir

from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.ground.change_types import EventType
from zkcdc.ground.change_values import ChangeValueDecoder, ValueDecodeError, schema_fingerprint
from zkcdc.ground.schema_files import current_schema, schema_dir


def record(**over: Any) -> dict[str, Any]:
    base = {
        "cluster": "c1", "seq": 7, "op": "UPDATE", "path": "/brokers/ids/1", "before": None,
        "after": None, "zxid": 5, "ts_ms": 1000, "captured_ms": 1001, "versions_skipped": 0,
        "source": {"mode": "watch", "session_id": None, "snapshot": False},
        "events": [{"type": EventType.BROKER_UPDATED, "broker_id": 1}],
    }  # fmt: skip
    return {**base, **over}


def body(schema: Any, value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas={}), value)
    return out.getvalue()


def single_object(schema: Any, value: dict[str, Any]) -> bytes:
    return b"\xc3\x01" + schema_fingerprint(schema) + body(schema, value)


@pytest.fixture
def later_zkcdc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The schema folder of a later zkcdc (its ChangeRecord v2 adds a field and an event type)."""
    folder, v2 = later_schema_dir(tmp_path)
    monkeypatch.setenv("ZKCDC_SCHEMA_DIR", str(folder))
    return v2


def test_todays_single_object_values_decode() -> None:
    value = SingleObjectCodec().encode(record())
    assert ChangeValueDecoder().decode(value)["events"][0]["broker_id"] == 1


def test_a_later_zkcdc_reads_values_of_todays_schema_with_the_new_fields_defaults(
    later_zkcdc: dict[str, Any],
) -> None:
    today = json.loads((schema_dir() / "history/ChangeRecord/v1.avsc").read_text())
    decoded = ChangeValueDecoder().decode(single_object(today, record()))
    assert decoded["region"] is None and decoded["seq"] == 7


def test_todays_zkcdc_reads_a_later_ones_value_with_an_unknown_event_type_as_its_default(
    later_zkcdc: dict[str, Any],
) -> None:
    today = json.loads((schema_dir() / "history/ChangeRecord/v1.avsc").read_text())
    value = record(region="eu", events=[{"type": "KRAFT_RECORD"}])
    confluent = b"\x00" + (9).to_bytes(4, "big") + body(later_zkcdc, value)
    decoder = ChangeValueDecoder(lambda schema_id: json.dumps(later_zkcdc), reader=today)
    decoded = decoder.decode(confluent)
    assert decoded["events"][0]["type"] == EventType.UNKNOWN_ZNODE and "region" not in decoded


def test_a_confluent_value_fetches_its_writer_schema_once_per_id() -> None:
    asked: list[int] = []

    def registry(schema_id: int) -> str:
        asked.append(schema_id)
        return json.dumps(current_schema("ChangeRecord"))

    decoder = ChangeValueDecoder(registry)
    value = b"\x00" + (3).to_bytes(4, "big") + body(current_schema("ChangeRecord"), record())
    for _ in range(3):
        assert decoder.decode(value)["path"] == "/brokers/ids/1"
    assert asked == [3]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x00\x00\x00\x00\x01" + b"\x02", "give the schema registry's URL"),
        (b"\xc3\x01" + b"\x11" * 8 + b"\x00", "is no released ChangeRecord version"),
        (b"{}", "neither single-object encoded nor in Confluent's wire format"),
        (b"", "neither single-object"),
    ],
)
def test_values_it_cannot_read_are_one_clear_error(value: bytes, reason: str) -> None:
    with pytest.raises(ValueDecodeError, match=reason):
        ChangeValueDecoder().decode(value)


def test_a_registry_that_returns_no_avro_schema_is_one_clear_error() -> None:
    decoder = ChangeValueDecoder(lambda schema_id: '{"type": "nonsense"}')
    with pytest.raises(ValueDecodeError, match="schema id 4 is no Avro schema"):
        decoder.decode(b"\x00\x00\x00\x00\x04\x00")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from([b"", b"\x00\x00\x00\x00\x01", b"single"]))
def test_no_bytes_make_it_raise_anything_but_its_own_error(tail: bytes, prefix: bytes) -> None:
    good = SingleObjectCodec().encode(record())
    head = good[:10] if prefix == b"single" else prefix
    decoder = ChangeValueDecoder(lambda schema_id: json.dumps(current_schema("ChangeRecord")))
    with contextlib.suppress(ValueDecodeError):
        decoder.decode(head + tail)


def test_the_spark_rows_of_both_wire_forms_and_of_bad_bytes() -> None:
    """What registry mode's pandas UDF gives Spark for each value: the job's columns (events as
    JSON without null fields, as Spark's to_json writes them) or the reason in `error`."""
    from zkcdc.streaming.job.change_source import decoded_row

    decoder = ChangeValueDecoder(lambda schema_id: json.dumps(current_schema("ChangeRecord")))
    confluent = b"\x00" + (1).to_bytes(4, "big") + body(current_schema("ChangeRecord"), record())
    for value in (SingleObjectCodec().encode(record()), confluent):
        row = decoded_row(decoder, value)
        assert row[:5] == ("c1", 7, "UPDATE", "/brokers/ids/1", 1000)
        assert json.loads(row[5]) == [{"type": EventType.BROKER_UPDATED, "broker_id": 1}]
        assert row[6] is None
    bad = decoded_row(decoder, b"nonsense")
    assert bad[:6] == (None,) * 6 and "neither single-object" in bad[6]
    assert decoded_row(decoder, None)[6] == "no value"
