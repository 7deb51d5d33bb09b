"""Record bytes split off container blocks without decoding: each span is exactly one record's
Avro form, whichever way its arrays were written, and damage is found, not copied."""

from __future__ import annotations

import io

import fastavro
import pytest

from zkcdc.capture.decoders import partition_state
from zkcdc.capture.delivery.event_log import EventLogWriter, log_files, read_records, read_spans
from zkcdc.capture.encoding.avro_codec import load_schema, schema_json
from zkcdc.capture.encoding.avro_encoder import compile_encoder
from zkcdc.capture.encoding.avro_spans import SpanError, compile_splitter
from zkcdc.capture.records import ChangeRecord, Source, Znode
from zkcdc.ground.change_types import Op

KEEP = ("cluster", "seq", "path", "ts_ms", "captured_ms")


def records(n: int) -> list[dict]:
    out = []
    for seq in range(1, n + 1):
        before = (
            f'{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":{seq},"isr":[1,2,3]}}'
        )
        after = (
            f'{{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":{seq + 1},"isr":[2,3]}}'
        )
        out.append(ChangeRecord(
            cluster="c1", seq=seq, op=Op.UPDATE, path=f"/brokers/topics/t/partitions/{seq}/state",
            before=Znode(before.encode(), seq, 10, 10, 1000, 1000, 0),
            after=Znode(after.encode(), seq + 1, 10, 12, 1000, 2000 + seq, 0),
            zxid=seq, ts_ms=2000 + seq, captured_ms=2003 + seq * 1000,
            source=Source("watch", 0x1234, False),
            events=tuple(partition_state.decode("t", seq, before.encode(), after.encode())),
        ).to_avro())  # fmt: skip
    return out


@pytest.mark.parametrize("sized", [True, False], ids=["sized arrays", "counted arrays"])
def test_each_span_is_one_records_bytes_with_its_key_fields(sized):
    schema = load_schema()
    values = records(20)
    assert all(len(v["events"]) >= 2 for v in values)  # leader change + ISR shrink
    encode = compile_encoder(schema, sized_arrays=sized)
    bodies = [encode(v) for v in values]
    split = compile_splitter(schema_json(), KEEP)
    spans = split(b"".join(bodies), len(bodies))
    assert [s[-1] for s in spans] == bodies
    assert [s[:-1] for s in spans] == [tuple(v[k] for k in KEEP) for v in values]
    for body, value in zip(bodies, values, strict=True):
        assert fastavro.schemaless_reader(io.BytesIO(body), schema, schema) == value


def test_block_data_that_does_not_end_with_its_records_is_damage():
    schema = load_schema()
    encode = compile_encoder(schema, sized_arrays=True)
    data = b"".join(encode(v) for v in records(3))
    split = compile_splitter(schema_json(), KEEP)
    with pytest.raises(SpanError):
        split(data[:-5], 3)  # torn
    with pytest.raises(SpanError):
        split(data + b"\0\0", 3)  # more than it counts


def test_a_log_reads_as_spans_equal_to_its_records_even_written_by_fastavro(tmp_path):
    values = records(30)
    log = tmp_path / "log"
    writer = EventLogWriter(log, "c1", now=lambda: 0.0)
    writer.append(values[:15])
    writer.append(values[15:])
    writer.close()
    # An older file: fastavro's writer, arrays counted, not sized.
    with (log / "c1.00000000000000000031.avro").open("wb") as out:
        more = [dict(v, seq=v["seq"] + 30) for v in values]
        fastavro.writer(out, fastavro.parse_schema(schema_json()), more, codec="null")
    damaged = []
    spans = [s for block in read_spans(log, damaged.append) for s in block]
    schema = load_schema()
    decoded = [fastavro.schemaless_reader(io.BytesIO(s.body), schema, schema) for s in spans]
    assert decoded == list(read_records(log)) and not damaged
    assert [s.seq for s in spans] == list(range(1, 61))
    assert len(log_files(log)) == 2


def test_a_record_cut_anywhere_is_damage_never_a_crash_or_a_short_span():
    schema = load_schema()
    encode = compile_encoder(schema, sized_arrays=True)
    bodies = [encode(v) for v in records(2)]
    data = b"".join(bodies)
    split = compile_splitter(schema_json(), KEEP)
    for cut in range(len(bodies[0]) + 1, len(data)):  # every cut inside the second record
        with pytest.raises(SpanError):
            split(data[:cut], 2)
