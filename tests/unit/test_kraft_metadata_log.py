"""The KRaft metadata log's bytes: record batches, their CRC, metadata and control records, read
back exactly as written; damage named and skipped; arbitrary bytes never break the reader."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_log_writer import (
    batch,
    encode_struct,
    leader_change,
    metadata_batch,
    metadata_value,
    uuid_bytes,
)

from zkcdc.capture.kraft.message_layouts import METADATA, Field, Struct, StructArray
from zkcdc.capture.kraft.message_reader import MessageError, read_message, uuid_text
from zkcdc.capture.kraft.metadata_records import (
    ControlRecord,
    MetadataRecord,
    Undecodable,
    decode_metadata,
    entries,
)
from zkcdc.capture.kraft.record_batches import Batch, BatchDamage, batches

_INTS = {"int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
         "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}  # fmt: skip
_UUIDS = st.binary(min_size=16, max_size=16).map(uuid_text)


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        low, high = _INTS[kind]
        return st.integers(low, high)
    return {
        "float64": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "uuid": _UUIDS,
        "string": st.text(max_size=30),
        "bytes": st.binary(max_size=30),
    }[kind]


def _field(field: Field, version: int) -> st.SearchStrategy[Any]:
    kind = field.kind
    if isinstance(kind, Struct):
        base: st.SearchStrategy[Any] = _struct(kind.fields, version)
    elif isinstance(kind, StructArray):
        base = st.lists(_struct(kind.fields, version), max_size=3)
    elif kind.startswith("[]"):
        base = st.lists(_scalar(kind[2:]), max_size=5)
    else:
        base = _scalar(kind)
    return st.one_of(st.none(), base) if field.nullable_in(version) else base


def _struct(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {fd.name: _field(fd, version) for fd in fields if fd.present_in(version)}
    )


_LAYOUT_VERSIONS = [
    (key, version)
    for key, layout in sorted(METADATA.items())
    for version in range(layout.versions[0], layout.versions[1] + 1)
]


@pytest.mark.parametrize(("api_key", "version"), _LAYOUT_VERSIONS)
def test_every_metadata_record_version_reads_back_what_was_written(
    api_key: int, version: int
) -> None:
    layout = METADATA[api_key]

    @settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
    @given(_struct(layout.fields, version))
    def round_trip(values: dict[str, Any]) -> None:
        key, got_version, name, fields = decode_metadata(metadata_value(api_key, version, values))
        assert (key, got_version, name) == (api_key, version, layout.name)
        for field_name, value in values.items():
            assert fields[field_name] == value, field_name

    round_trip()


def test_tagged_fields_not_written_read_as_their_defaults() -> None:
    change = {"PartitionId": 3, "TopicId": uuid_text(bytes(range(16)))}
    fields = read_message(METADATA[5], 0, encode_struct(METADATA[5].fields, 0, {
        **change, "Isr": None, "Leader": -2, "Replicas": None, "RemovingReplicas": None,
        "AddingReplicas": None, "LeaderRecoveryState": -1,
    }))  # fmt: skip
    assert fields["Leader"] == -2  # no leader change
    assert fields["Isr"] is None and fields["LeaderRecoveryState"] == -1
    assert fields["EligibleLeaderReplicas"] is None  # not in version 0 at all


def test_uuids_read_as_kafka_shows_them() -> None:
    assert uuid_text(uuid_bytes("Slp-JZn-SZaFS7LGozNVYQ")) == "Slp-JZn-SZaFS7LGozNVYQ"


def _topic(offset: int) -> bytes:
    return metadata_batch(offset, 1, [(2, 0, {"Name": f"t{offset}", "TopicId": "A" * 22})])


def test_batches_give_their_records_with_offsets_epoch_and_kind() -> None:
    data = leader_change(0, 4, leader=101, voters=[101, 102]) + _topic(1)
    read = list(batches(data))
    assert [type(b) for b in read] == [Batch, Batch]
    control, topic = (entries(b) for b in read)  # type: ignore[arg-type]
    assert isinstance(control[0], ControlRecord)
    assert control[0].fields["LeaderId"] == 101 and control[0].epoch == 4
    assert isinstance(topic[0], MetadataRecord)
    assert (topic[0].offset, topic[0].name, topic[0].fields["Name"]) == (1, "TopicRecord", "t1")


def test_a_batch_with_a_bad_crc_is_named_and_the_next_one_still_read() -> None:
    bad = bytearray(_topic(0))
    bad[-3] ^= 0xFF
    read = list(batches(bytes(bad) + _topic(1)))
    assert isinstance(read[0], BatchDamage) and "CRC32C" in str(read[0])
    assert read[0].base_offset == 0
    assert isinstance(read[1], Batch) and read[1].base_offset == 1


def test_a_batch_cut_short_is_not_given_until_it_is_whole() -> None:
    whole = _topic(0) + _topic(1)
    first = len(_topic(0))
    for cut in range(first, len(whole)):
        read = list(batches(whole[:cut]))
        assert [b.base_offset for b in read if isinstance(b, Batch)] == [0]
    assert len(list(batches(whole))) == 2


def test_a_record_of_an_unknown_type_or_version_is_undecodable_and_the_rest_read() -> None:
    unknown_key = b"\x01\x63\x00\x00"  # frame 1, apiKey 99
    newer = metadata_value(2, 0, {"Name": "x", "TopicId": "A" * 22})
    newer = newer[:2] + b"\x07" + newer[3:]  # TopicRecord version 7
    good = metadata_value(2, 0, {"Name": "y", "TopicId": "A" * 22})
    (read,) = batches(batch(0, 1, [(None, unknown_key), (None, newer), (None, good)]))
    got = entries(read)  # type: ignore[arg-type]
    assert isinstance(got[0], Undecodable) and "apiKey 99" in got[0].problem
    assert isinstance(got[1], Undecodable) and "version 7" in got[1].problem
    assert isinstance(got[2], MetadataRecord) and got[2].fields["Name"] == "y"


def test_a_message_with_bytes_after_its_end_is_an_error() -> None:
    value = metadata_value(20, 0, {}) + b"\x00"
    with pytest.raises(MessageError, match="after the end"):
        decode_metadata(value)


@settings(max_examples=300)
@given(st.binary(max_size=400), st.integers(0, 3))
def test_fuzz_any_bytes_give_batches_or_damage_and_never_an_exception(
    noise: bytes, prefix: int
) -> None:
    data = _topic(0)[: prefix * 20] + noise
    for read in batches(data):
        if isinstance(read, Batch):
            for entry in entries(read):
                assert isinstance(entry, MetadataRecord | ControlRecord | Undecodable)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_fuzz_any_record_value_decodes_or_is_a_message_error(value: bytes) -> None:
    try:
        api_key, *_ = decode_metadata(value)
    except MessageError as exc:
        assert str(exc)  # a reason, for the log line
    else:
        assert api_key in METADATA


def test_fuzz_a_valid_crc_over_garbage_records_is_damage_not_a_crash() -> None:
    good = bytearray(_topic(0))
    good[-5] = 0x7F  # inside the record: its lengths no longer add up
    from crc32c import crc32c

    struct.pack_into(">I", good, 17, crc32c(bytes(good[21:])))
    (read,) = batches(bytes(good))
    assert isinstance(read, BatchDamage | Batch)
