"""Every reader zkcdc ships takes any bytes, any key, any headers on any of its topics: never an
exception, every valid message shown, each bad one counted (anyone who may write to a topic can
put anything there)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcdc.capture.delivery import topic_holdings
from zkcdc.capture.delivery.topic_follower import TopicFollower as StandbyFollower
from zkcdc.capture.encoding.avro_codec import SingleObjectCodec
from zkcdc.ground.change_types import EventType
from zkcdc.ground.change_values import ChangeValueDecoder
from zkcdc.ground.unreadable_messages import UnreadableMessages
from zkcdc.streaming.rules.alert_records import Alert
from zkcdc.streaming.state import state_topic
from zkcdc.streaming.state.state_view import ClusterView
from zkcdc.view import alerts_tail
from zkcdc.view.live_feeds import alerts_feed, changes_feed, state_feed
from zkcdc.view.live_model import LiveModel


@dataclass
class Message:
    """A confluent-kafka message as readers see it."""

    _key: bytes | None
    _value: bytes | None
    _headers: list[tuple[str, bytes | None]] | None = None
    _offset: int = 0
    valid: bool = False
    _topic: str = "t"

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def error(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000)


junk_bytes = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.sampled_from([b"{}", b"[]", b"null", b"1e999", b"NaN", b'"x"', b"\xc3\x01", b"\x00",
                     b'{"kind":"broker"}', b'{"alert_id":"a","status":"FIRING"}',
                     b'{"kind":"partition","topic":1,"partition":"x"}', b"9" * 40]),
    st.dictionaries(st.sampled_from(["kind", "topic", "partition", "isr", "alert_id", "rule",
                                     "status", "started_ms", "broker_id", "cluster", "entity"]),
                    st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans(),
                              st.lists(st.integers(), max_size=3)),
                    max_size=6).map(lambda d: json.dumps(d).encode()),
)  # fmt: skip
junk_keys = st.one_of(st.none(), st.binary(max_size=20),
                      st.sampled_from([b"c1/broker/9", b"c1/partition/t/9", b"c1/controller",
                                       b"/", b"c1/nonsense/2"]))  # fmt: skip
junk_headers = st.one_of(
    st.none(),
    st.lists(st.tuples(st.sampled_from(["zkcdc.seq", "zkcdc.cluster", "x"]),
                       st.one_of(st.none(), st.binary(max_size=8), st.just(b"c1"))), max_size=3),
)  # fmt: skip


def junk() -> st.SearchStrategy[Message]:
    return st.builds(Message, junk_keys, junk_bytes, junk_headers)


def mixed(valid: list[Message]) -> st.SearchStrategy[list[Message]]:
    """The valid messages in order, with junk anywhere between them."""

    @st.composite
    def build(draw: Any) -> list[Message]:
        out: list[Message] = []
        for message in valid:
            out.extend(draw(st.lists(junk(), max_size=3)))
            out.append(message)
        out.extend(draw(st.lists(junk(), max_size=3)))
        for offset, message in enumerate(out):
            message._offset = offset
        return out

    return build()


def _state_values() -> list[Message]:
    broker = {"cluster": "c1", "kind": "broker", "broker_id": 1, "alive": True,
              "endpoints": ["PLAINTEXT://h:9092"], "epoch": 5, "preferred_partitions": 2,
              "preferred_not_led": 0, "updated_ms": 1}  # fmt: skip
    partition = {"cluster": "c1", "kind": "partition", "topic": "t", "partition": 0,
                 "replicas": [1, 2], "adding": [], "removing": [], "leader": 1, "isr": [1],
                 "leader_epoch": 3, "controller_epoch": 1, "offline": False,
                 "under_replicated": True, "updated_ms": 1}  # fmt: skip
    return [
        Message(b"c1/broker/1", orjson.dumps(broker), valid=True),
        Message(b"c1/partition/t/0", orjson.dumps(partition), valid=True),
    ]


STATE = _state_values()
ALERTS = [
    Message(b"a1", Alert("a1", "broker_down", "critical", "FIRING", "c1", "broker/2", 10, None,
                         "broker 2 is gone", {"why": "x"}).as_text().encode(), valid=True),
    Message(b"a2", Alert("a2", "under_replicated", "warning", "RESOLVED", "c1", "t/0", 10, 20,
                         "t/0 is whole again").as_text().encode(), valid=True),
]  # fmt: skip
CHANGE = {
    "cluster": "c1", "seq": 7, "op": "UPDATE", "path": "/brokers/ids/1", "before": None,
    "after": None, "zxid": 5, "ts_ms": 1000, "captured_ms": 1001, "versions_skipped": 0,
    "source": {"mode": "watch", "session_id": None, "snapshot": False},
    "events": [{"type": EventType.BROKER_UPDATED, "broker_id": 1}],
}  # fmt: skip
CHANGES = [Message(b"c1/brokers/ids/1", SingleObjectCodec().encode({**CHANGE, "seq": s}),
                   [("zkcdc.seq", str(s).encode()), ("zkcdc.cluster", b"c1")], valid=True)
           for s in (7, 8)]  # fmt: skip
DECODER = ChangeValueDecoder()
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _bad(messages: list[Message]) -> int:
    return sum(1 for m in messages if not m.valid)


class _Kafka:
    """Hands a reader's `take` the messages as `KafkaConnection.read_to_end` does."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    def read_to_end(self, topic: str, take: Any, *_: Any, **__: Any) -> None:
        for message in self.messages:
            take(message)

    def describe(self) -> str:
        return "kafka"


@FUZZ
@given(mixed(STATE))
def test_state_show_keeps_every_valid_state_record_and_counts_the_rest(
    messages: list[Message],
) -> None:
    skipped = UnreadableMessages("state show", warn=lambda *a, **k: None)
    latest = state_topic.read_state(_Kafka(messages), "zkcdc.state", 1, skipped)  # type: ignore[arg-type]
    # A junk message of the right shape under a valid key is a valid record too: the newest
    # value per key wins, so every valid key is there and what was read renders.
    assert {"c1/broker/1", "c1/partition/t/0"} <= latest.keys()
    view = ClusterView.of("c1", latest)
    assert view.tables() and view.summary()
    assert skipped.count <= _bad(messages)
    assert skipped.count + sum(1 for m in messages if _is_state_record(m)) == len(messages)


def _is_state_record(message: Message) -> bool:
    from zkcdc.streaming.state.state_values import state_entry

    try:
        state_entry(message)
    except ValueError:
        return False
    return True


class _Follower:
    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.caught_up = False

    def poll(self, _: float) -> list[Message]:
        out, self.messages = self.messages, []
        self.caught_up = True
        return out


@FUZZ
@given(mixed(ALERTS))
def test_alerts_tail_shows_every_alert_and_counts_each_bad_message(
    messages: list[Message],
) -> None:
    shown: list[dict[str, Any]] = []

    def show(alert: dict[str, Any]) -> None:
        alerts_tail.alert_line(alert)  # renders, whatever the fields hold
        orjson.dumps(alert, option=orjson.OPT_SORT_KEYS)  # and as `--json`
        shown.append(alert)

    skipped = UnreadableMessages("alerts tail", warn=lambda *a, **k: None)
    alerts_tail.tail(_Follower(messages), alerts_tail.AlertFilter(), show, False,  # type: ignore[arg-type]
                     threading.Event(), skipped)  # fmt: skip
    assert [a["alert_id"] for a in shown if a["alert_id"] in ("a1", "a2")][:2] == ["a1", "a2"]
    assert skipped.count + len(shown) == len(messages)
    assert skipped.count <= _bad(messages)


@FUZZ
@given(mixed(STATE), mixed(ALERTS), mixed(CHANGES))
def test_the_uis_three_feeds_take_what_they_can_and_count_the_rest(
    state: list[Message], alerts: list[Message], changes: list[Message]
) -> None:
    model = LiveModel(now_ms=lambda: 5000)
    feeds = [(state_feed(model), state), (alerts_feed(model), alerts),
             (changes_feed(model, DECODER), changes)]  # fmt: skip
    for feed, messages in feeds:
        skipped = UnreadableMessages(f"ui {feed.name}", warn=lambda *a, **k: None)
        for message in messages:
            value = skipped.read(message, feed.decode)
            if value is not None:
                feed.apply(value)
        assert skipped.count <= _bad(messages), feed.name
    snapshot = model.snapshot()
    orjson.dumps(snapshot, option=orjson.OPT_NON_STR_KEYS)  # the page gets it as JSON
    assert {"a1", "a2"} <= {a["alert_id"] for a in snapshot["alerts"]}
    assert len([r for r in snapshot["recent"] if r["seq"] in (7, 8)]) >= 2
    assert model.rows_of("c1", "broker/1")


class _Consumer:
    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    def list_topics(self, topic: str, timeout: float) -> Any:
        from types import SimpleNamespace

        found = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics={topic: found})

    def assign(self, _: Any) -> None:
        pass

    def consume(self, _: int, __: float) -> list[Message]:
        out, self.messages = self.messages, []
        return out


@dataclass
class _ConsumerKafka:
    messages: list[Message] = field(default_factory=list)

    def consumer(self, *_: Any, **__: Any) -> _Consumer:
        return _Consumer(self.messages)


@FUZZ
@given(mixed(CHANGES))
def test_a_standby_takes_every_change_record_of_its_cluster_and_counts_the_rest(
    messages: list[Message],
) -> None:
    follower = StandbyFollower(_ConsumerKafka(messages), "zkcdc.changes", "c1", DECODER)  # type: ignore[arg-type]
    follower.skipped = UnreadableMessages("standby", warn=lambda *a, **k: None)
    taken = follower.poll(0.1)
    assert follower.state().seq >= 8
    assert taken >= 2 and follower.skipped.count <= _bad(messages)


@FUZZ
@given(mixed(CHANGES))
def test_replays_read_back_of_the_topic_finds_every_delivered_seq(
    messages: list[Message],
) -> None:
    found = topic_holdings.delivered_seqs(_Kafka(messages), "zkcdc.changes", "c1", 0, 1)  # type: ignore[arg-type]
    assert {7, 8} <= found
