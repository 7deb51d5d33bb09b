"""Secrets of Kafka's tree never reach a record: SCRAM credentials and password configs are
replaced by keyed digests before the tracker keeps the znode, in watch and txnlog capture;
CONFIG_CHANGED still names the keys that changed; everything else is kept byte for byte."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcdc.capture.records import Znode
from zkcdc.capture.secret_redaction import MARKER, Redactor, is_secret_key, keep_all
from zkcdc.capture.tracker import Tracker, TrackerState
from zkcdc.capture.txnlog.transactions import CREATE, MULTI, SET_DATA, Txn
from zkcdc.capture.txnlog.transactions import Op as TxnOp
from zkcdc.capture.txnlog.txn_tracker import TxnTracker
from zkcdc.ground.change_types import EventType

SCRAM = "salt=c2FsdA==,stored_key=U1RPUkVE,server_key=U0VSVkVS,iterations=4096"


def _config(**config: str) -> bytes:
    return json.dumps({"version": 1, "config": config}).encode()


def _values(data: bytes | None) -> dict[str, str]:
    assert data is not None
    return dict(json.loads(data)["config"])


def test_scram_credentials_of_a_user_are_replaced_and_quotas_kept() -> None:
    data = _config(**{"SCRAM-SHA-512": SCRAM, "SCRAM-SHA-256": SCRAM, "producer_byte_rate": "10"})
    kept = _values(Redactor().data("/config/users/alice", data))
    assert kept["producer_byte_rate"] == "10"
    assert kept["SCRAM-SHA-512"].startswith(MARKER) and kept["SCRAM-SHA-256"].startswith(MARKER)
    assert SCRAM not in json.dumps(kept)


def test_password_keys_of_broker_configs_are_replaced_with_their_listener_prefixes() -> None:
    secret = "encrypted-by-kafka-password-encoder"
    data = _config(**{
        "listener.name.sasl_ssl.ssl.keystore.password": secret,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": secret,
        "ssl.keystore.key": secret,
        "password.encoder.secret": secret,
        "log.retention.ms": "1000",
    })  # fmt: skip
    kept = _values(Redactor().data("/config/brokers/1", data))
    assert secret not in json.dumps(kept)
    assert kept["log.retention.ms"] == "1000"


def test_data_without_secrets_is_kept_byte_for_byte() -> None:
    topic = b'{"version":1,  "config":{"retention.ms":"5"}}'
    assert Redactor().data("/config/topics/t", topic) is topic
    scram_elsewhere = _config(**{"SCRAM-SHA-512": "x"})  # not a user's config: not a credential
    assert Redactor().data("/config/topics/t", scram_elsewhere) is scram_elsewhere
    for path in ("/brokers/ids/1", "/config/changes/config_change_0000000001", "/consumers/g"):
        password = _config(**{"ssl.key.password": "p"})
        assert Redactor().data(path, password) is password
    assert Redactor().data("/config/users/u", b"[not json") == b"[not json"
    assert Redactor().data("/config/users/u", None) is None


def test_the_digest_is_stable_per_value_and_differs_per_key_value_path_and_redaction_key() -> None:
    def digest(key: bytes, path: str, value: str) -> str:
        return _values(Redactor(key).data(path, _config(**{"SCRAM-SHA-512": value})))[
            "SCRAM-SHA-512"
        ]

    a = digest(b"k", "/config/users/u", "v1")
    assert a == digest(b"k", "/config/users/u", "v1")
    assert len({a, digest(b"k", "/config/users/u", "v2"), digest(b"k", "/config/users/w", "v1"),
                digest(b"other", "/config/users/u", "v1")}) == 4  # fmt: skip


def test_secret_keys() -> None:
    assert is_secret_key("users", "SCRAM-SHA-256")
    assert is_secret_key("brokers", "sasl.jaas.config")
    assert is_secret_key("brokers", "ssl.truststore.certificates")
    assert not is_secret_key("brokers", "SCRAM-SHA-256")
    assert not is_secret_key("topics", "cleanup.policy")
    assert not is_secret_key("brokers", "ssl.keystore.location")


def test_a_scram_change_still_raises_config_changed_naming_the_key_but_not_the_values() -> None:
    tracker = Tracker(TrackerState(cluster="c"), lambda: 1)
    path = "/config/users/alice"
    tracker.read(path, Znode(_config(**{"SCRAM-SHA-512": "salt=a"}), 0, 5, 5))
    (record,) = tracker.read(path, Znode(_config(**{"SCRAM-SHA-512": "salt=b"}), 1, 5, 6))
    (event,) = record.events
    assert event.type == EventType.CONFIG_CHANGED
    assert event.changed_keys == ("SCRAM-SHA-512",)
    text = repr(record) + repr(tracker.state.tree)
    assert "salt=a" not in text and "salt=b" not in text


def test_the_txnlog_tracker_redacts_creates_sets_and_its_snapshot() -> None:
    tracker = TxnTracker(TrackerState(cluster="c"), lambda: 1, chroot="/kafka")
    path = "/kafka/config/users/alice"
    create = TxnOp(CREATE, path, _config(**{"SCRAM-SHA-512": "s1"}))
    update = TxnOp(SET_DATA, path, _config(**{"SCRAM-SHA-512": "s2"}), version=1)
    records = tracker.apply(Txn(1, 1, 10, 1, MULTI, (create,), 0))
    records += tracker.apply(Txn(1, 2, 11, 2, MULTI, (update,), 0))
    assert [r.path for r in records] == ["/config/users/alice"] * 2
    assert "s1" not in repr(records) + repr(tracker.state.tree)
    assert "s2" not in repr(records) + repr(tracker.state.tree)


def test_keep_all_keeps_secrets_for_forensic_captures() -> None:
    tracker = Tracker(TrackerState(cluster="c"), lambda: 1, redact=keep_all)
    (record,) = tracker.read("/config/users/u", Znode(_config(**{"SCRAM-SHA-512": SCRAM})))
    assert record.after is not None and SCRAM.encode() in (record.after.data or b"")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(
    entity=st.sampled_from(["users", "brokers", "topics", "clients", "ips"]),
    config=st.dictionaries(
        st.sampled_from(["SCRAM-SHA-512", "ssl.key.password", "sasl.jaas.config", "a.b"])
        | st.text(),
        st.text(min_size=8) | JSON,
        max_size=5,
    ),
)
def test_no_secret_value_survives_any_config_shape(entity: str, config: dict[str, object]) -> None:
    data = json.dumps({"version": 1, "config": config}).encode()
    out = Redactor().data(f"/config/{entity}/x", data)
    assert out is not None
    kept = json.loads(out)["config"]
    assert kept.keys() == config.keys()
    for key, value in config.items():
        if is_secret_key(entity, key):
            assert isinstance(kept[key], str) and kept[key].startswith(MARKER)
        else:
            assert kept[key] == value


@given(st.binary() | JSON.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_at_a_config_path_never_raise(data: bytes) -> None:
    Redactor().data("/config/users/u", data)


@pytest.mark.parametrize("depth", [300, 1_000])  # past orjson's writing; past Python's json
@pytest.mark.parametrize("deep_key", ["SCRAM-SHA-512", "other"])
def test_a_deeply_nested_config_value_is_redacted_without_an_error(
    deep_key: str, depth: int
) -> None:
    deep = "[" * depth + "1" + "]" * depth
    data = ('{"version":1,"config":{"SCRAM-SHA-512":"' + SCRAM + '","a":2,"' + deep_key
            + '":' + deep + "}}").encode()  # fmt: skip
    out = Redactor().data("/config/users/u", data)
    assert out is not None and SCRAM.encode() not in out
    kept = orjson.loads(out)["config"]
    assert kept["SCRAM-SHA-512"].startswith(MARKER) and kept["a"] == 2
    assert deep_key in kept


def test_an_integer_past_64_bits_beside_a_secret_is_kept_exactly() -> None:
    data = (
        b'{"version":1,"config":{"SCRAM-SHA-512":"'
        + SCRAM.encode()
        + b'","n":-9223372036854775809}}'
    )
    out = Redactor().data("/config/users/u", data)
    assert out is not None and json.loads(out)["config"]["n"] == -9223372036854775809


ODD = st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "[" * 1100 + "]" * 1100])


@given(
    entity=st.sampled_from(["users", "brokers", "topics", "clients", "ips"]),
    key=st.sampled_from(
        [
            "SCRAM-SHA-512",
            "ssl.key.password",
            "sasl.jaas.config",
            "listener.name.x.ssl.keystore.key",
        ]
    ),
    secret=st.text("abcdef0123456789", min_size=12, max_size=24),
    odd=ODD,
    cut=st.integers(min_value=0, max_value=40),
)
def test_no_secret_survives_data_orjson_refuses_or_no_reader_takes(
    entity: str, key: str, secret: str, odd: str, cut: int
) -> None:
    """1e400, NaN and nesting past 1024 are refused by orjson; the same cut short by no reader
    is taken at all: the secret is replaced all the same."""
    if not is_secret_key(entity, key):
        key = "password"
    whole = '{"version":1,"config":{"' + key + '":"S3CRET' + secret + '","n":' + odd + "}}"
    data = whole[: len(whole) - cut].encode()
    out = Redactor().data(f"/config/{entity}/x", data)
    assert out is not None and b"S3CRET" + secret.encode() not in out


def test_data_no_reader_takes_and_without_secret_words_is_kept_byte_for_byte() -> None:
    for data in (b'{"version":1,"config":{"retention.ms":"1"', b"\xff\xfe not json"):
        assert Redactor().data("/config/topics/t", data) == data


def test_a_value_orjson_refuses_beside_a_secret_keeps_the_other_keys() -> None:
    data = b'{"version":1,"config":{"SCRAM-SHA-512":"' + SCRAM.encode() + b'","a":"b","n":1e400}}'
    out = Redactor().data("/config/users/u", data)
    assert out is not None and SCRAM.encode() not in out
    kept = json.loads(out)["config"]
    assert kept["SCRAM-SHA-512"].startswith(MARKER) and kept["a"] == "b"
    assert kept["n"] == float("inf")
