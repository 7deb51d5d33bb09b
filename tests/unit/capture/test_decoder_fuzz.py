"""Never dies on data: any bytes, any JSON shape or depth, at any path under the chroot, give a
record that encodes and reads back; what a decoder cannot read is UNPARSEABLE with a reason.

The examples are bounded here (`make test`); `make fuzz` runs the same properties much longer."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.capture.decoders import router
from zkcdc.capture.encoding.avro_codec import load_schema
from zkcdc.capture.encoding.avro_encoder import compile_encoder
from zkcdc.capture.encoding.record_encoding import encode_records
from zkcdc.capture.records import ClusterEvent, Znode
from zkcdc.capture.tracker import Tracker, TrackerState
from zkcdc.ground.change_types import EventType

SCHEMA = load_schema()
ENCODE = compile_encoder(SCHEMA, sized_arrays=True)

# Paths of every route (and their parents), with hostile names where Kafka puts a name.
NAMES = st.one_of(
    st.sampled_from(["t", "0", "1", "g", "c", "99999999999", "-1", "²", "٣", "<default>"]),
    st.text(st.characters(exclude_characters="/", exclude_categories=("Cs",)), min_size=1),
)
TEMPLATES = [
    "/brokers/topics/{}/partitions/{}/state",
    "/brokers/topics/{}/partitions/{}",
    "/brokers/topics/{}",
    "/brokers/ids/{}",
    "/controller",
    "/controller_epoch",
    "/admin/reassign_partitions",
    "/admin/preferred_replica_election",
    "/admin/delete_topics/{}",
    "/config/changes/{}",
    "/config/topics/{}",
    "/config/brokers/{}",
    "/config/users/{}",
    "/consumers/{}/ids/{}",
    "/consumers/{}/owners/{}/{}",
    "/consumers/{}/offsets/{}/{}",
    "/isr_change_notification/{}",
    "/log_dir_event_notification/{}",
    "/cluster/id",
    "/{}",
    "/{}/{}",
]


@st.composite
def paths(draw: st.DrawFn) -> str:
    template = draw(st.sampled_from(TEMPLATES))
    return template.format(*(draw(NAMES) for _ in range(template.count("{}"))))


# The keys Kafka's formats use, so generated objects reach past the first field check.
KEYS = st.sampled_from(
    [
        "version",
        "leader",
        "isr",
        "leader_epoch",
        "controller_epoch",
        "partitions",
        "adding_replicas",
        "removing_replicas",
        "topic_id",
        "brokerid",
        "host",
        "port",
        "endpoints",
        "rack",
        "config",
        "subscription",
        "pattern",
        "broker",
        "event",
        "topic",
        "partition",
        "replicas",
        "0",
        "1",
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.one_of(KEYS, st.text(max_size=8)), inner, max_size=6)
    ),
    max_leaves=30,
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


DATA = st.one_of(
    st.none(),
    st.binary(max_size=200),
    JSON.map(_dumps),
    # Kafka-shaped objects with hostile values.
    st.dictionaries(KEYS, JSON, min_size=1, max_size=8).map(_dumps),
    # Nesting deeper than any parser's recursion limit, and bare numbers of every size.
    st.integers(min_value=1, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=1, max_value=5000).map(lambda n: b'{"a":' * n),
    st.integers().map(lambda n: str(n).encode()),
    st.text(max_size=30).map(lambda s: s.encode("utf-8", "surrogatepass")),
)


def _znode(data: bytes | None, version: int, czxid: int) -> Znode:
    return Znode(data, version=version, czxid=czxid, mzxid=czxid + version, mtime_ms=1)


def _read_back(body: bytes) -> dict[str, Any]:
    value = fastavro.schemaless_reader(io.BytesIO(body), SCHEMA, SCHEMA)
    assert isinstance(value, dict)
    return value


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(path=paths(), before=DATA, after=DATA, same_znode=st.booleans())
def test_any_bytes_at_any_path_give_a_record_that_encodes_and_reads_back(
    path: str, before: bytes | None, after: bytes | None, same_znode: bool
) -> None:
    state = TrackerState(cluster="c")
    tracker = Tracker(state, lambda: 1_000)
    tracker.begin_sync()
    tracker.end_sync()
    first = tracker.read(path, _znode(before, 0, 10))
    second = tracker.read(path, _znode(after, 1, 10 if same_znode else 20))
    gone = tracker.read(path, None)
    records = first + second + gone
    values, bodies = encode_records(ENCODE, records)
    assert [v["seq"] for v in values] == list(range(1, len(records) + 1))
    for value, body in zip(values, bodies, strict=True):
        read = _read_back(body)
        assert read["path"] == path
        for image in ("before", "after"):  # the raw bytes are always kept
            assert (read[image] or {}).get("data") == (value[image] or {}).get("data")
        for event in read["events"]:
            if event["type"] == EventType.UNPARSEABLE:
                assert event["reason"], "an UNPARSEABLE event says why"


@settings(deadline=None)
@given(path=paths(), data=DATA)
def test_decoding_never_raises(path: str, data: bytes | None) -> None:
    for before, after in ((None, data), (data, None), (data, data), (b"{}", data)):
        events = router.decode(
            path,
            None if before is None else _znode(before, 0, 1),
            None if after is None else _znode(after, 1, 1),
        )
        assert isinstance(events, list)


@pytest.mark.parametrize(
    ("path", "data"),
    [
        # json's RecursionError, which escaped the decoders and stopped capture.
        ("/consumers/g/ids/c", b"[" * 1000),
        ("/consumers/g/ids/c", b'{"version":1,"subscription":' + b"[" * 3000 + b"]" * 3000),
        # Numbers that parse but fit no Avro int or long.
        ("/brokers/topics/t/partitions/0/state", b'{"version":1,"leader":99999999999}'),
        ("/consumers/g/offsets/t/0", b"99999999999999999999999"),
        ("/consumers/g/offsets/t/0", "²".encode()),
        ("/consumers/g/offsets/t/0", b"9" * 5000),  # int() refuses over 4,300 digits
        ("/controller_epoch", b"9" * 5000),
        ("/consumers/g/ids/c", b'{"version":1,"subscription":{"t":4294967296}}'),
        ("/brokers/topics/t", b'{"version":1,"partitions":{"4294967296":[1]}}'),
        ("/brokers/topics/t", b'{"version":1,"partitions":{"0":[4294967296]}}'),
        # A lone surrogate: valid JSON, but no UTF-8 string can carry it into the record.
        ("/consumers/g/ids/c", b'{"version":1,"subscription":{"\\ud800":1}}'),
        ("/config/topics/t", b'{"version":1,"config":{"a":"\\udfff"}}'),
    ],
)
def test_hostile_values_are_unparseable_with_a_reason(path: str, data: bytes) -> None:
    events = router.decode(path, None, _znode(data, 0, 1))
    assert [e.type for e in events] == [EventType.UNPARSEABLE]
    assert events[0].reason


def test_a_partition_number_past_an_int_in_the_path_is_unparseable_not_a_crash() -> None:
    path = "/brokers/topics/t/partitions/99999999999/state"
    state = b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1]}'
    events = router.decode(path, None, _znode(state, 0, 1))
    assert [e.type for e in events] == [EventType.UNPARSEABLE]
    assert events[0].topic == "t" and events[0].partition is None


def test_events_that_do_not_fit_the_schema_become_unparseable_and_keep_the_raw_bytes() -> None:
    state = TrackerState(cluster="c")
    tracker = Tracker(state, lambda: 1_000)
    records = tracker.read("/brokers/ids/1", _znode(b"x", 0, 1))
    # As if a decoder had let a too-large number through.
    event = ClusterEvent(type=EventType.LEADER_CHANGED, leader=2**40)
    bad = dataclasses.replace(records[0], events=(event,))
    _, bodies = encode_records(ENCODE, [bad])
    read = _read_back(bodies[0])
    assert [e["type"] for e in read["events"]] == [EventType.UNPARSEABLE]
    assert "out of the range of an int" in read["events"][0]["reason"]
    assert read["after"]["data"] == b"x"
