"""The tree reader's answers in the order of ZooKeeper's notifications, with the server's
answers played by hand: a walk's read sent before a delete and answered after the
notifications of the deletes before it must not report the path ahead of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.protocol.states import EventType, ZnodeStat

from zkcdc.capture.watch import tree_reader
from zkcdc.capture.watch.messages import Message, Read, Unreadable

Answer = Callable[[Any, Exception | None], None]


class Server:
    """Holds each read the reader sends until the test answers it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Answer]] = []
        self.notify: Callable[[EventType, str], None] | None = None

    def answer(self, path: str, value: Any = None, error: Exception | None = None) -> None:
        index = next(i for i, (p, _) in enumerate(self.sent) if p == path)
        _, on_answer = self.sent.pop(index)
        on_answer(value, error)


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> tuple[tree_reader.TreeReader, Server, list[Message]]:
    server = Server()

    class Pipeline:
        def __init__(self, client: Any) -> None:
            pass

        def request(self, request: Any, on_answer: Answer) -> None:
            server.sent.append((request.path, on_answer))

    def route(client: Any, notify: Callable[[EventType, str], None]) -> None:
        server.notify = notify

    monkeypatch.setattr(tree_reader, "Pipeline", Pipeline)
    monkeypatch.setattr(tree_reader, "route_notifications", route)
    client = type("Client", (), {"chroot": ""})()
    emitted: list[Message] = []
    made = tree_reader.TreeReader(client, emitted.append, lambda: 1_000)  # type: ignore[arg-type]
    made.recursive = True
    return made, server, emitted


def _stat(version: int) -> ZnodeStat:
    return ZnodeStat(1, 2, 3, 4, version, 0, 0, 0, 2, 0, 2)


def test_a_walks_read_answered_after_later_deletes_waits_for_their_reads(reader: Any) -> None:
    made, server, emitted = reader
    request = "/admin/delete_topics/t"
    made._visit(request, None)  # a walk's read, sent while the znode is still there
    assert server.notify is not None
    # The controller deletes the topic, then the request; the notices come in that order.
    server.notify(EventType.DELETED, "/brokers/topics/t")
    server.notify(EventType.DELETED, request)
    server.answer(request, error=NoNodeError())  # the walk's read, after both deletes
    server.answer("/brokers/topics/t", error=NoNodeError())
    server.answer(request, error=NoNodeError())
    assert [m.path for m in emitted if isinstance(m, Read)] == ["/brokers/topics/t", request]


def test_a_stale_answer_with_data_is_left_to_the_later_read(reader: Any) -> None:
    made, server, emitted = reader
    made._visit("/controller", None)
    server.notify(EventType.CHANGED, "/controller")
    server.answer("/controller", (b"new", _stat(2)))  # already the changed data
    server.answer("/controller", (b"new", _stat(2)))
    reads = [m for m in emitted if isinstance(m, Read)]
    assert [(r.path, r.znode.version if r.znode else None) for r in reads] == [("/controller", 2)]


def test_a_stale_refusal_is_left_to_the_later_read(reader: Any) -> None:
    """A walk's read refused (its ACL gives no READ) after a notice of the path's change: the
    read that notice sent reports the path, refused again or with its data, in its turn."""
    made, server, emitted = reader
    made._visit("/config/topics/t", None)
    server.notify(EventType.CHANGED, "/config/topics/t")
    server.answer("/config/topics/t", error=NoAuthError())  # the walk's, stale
    assert not [m for m in emitted if isinstance(m, Unreadable | Read)]
    server.answer("/config/topics/t", error=NoAuthError())  # the notice's
    assert [m.path for m in emitted if isinstance(m, Unreadable)] == ["/config/topics/t"]


def test_a_refusal_with_no_later_read_is_reported_at_once(reader: Any) -> None:
    made, server, emitted = reader
    made._visit("/config/topics/t", None)
    server.answer("/config/topics/t", error=NoAuthError())
    assert [m.path for m in emitted if isinstance(m, Unreadable)] == ["/config/topics/t"]


def test_every_read_a_notice_sent_reports_though_later_ones_are_out(reader: Any) -> None:
    """Under a storm each notice's read reports its version: none is left to a later read."""
    _, server, emitted = reader
    for _ in range(3):
        server.notify(EventType.CHANGED, "/brokers/topics/t/partitions/0/state")
    for version in (4, 5, 6):
        server.answer("/brokers/topics/t/partitions/0/state", (b"{}", _stat(version)))
    reads = [m for m in emitted if isinstance(m, Read)]
    assert [r.znode.version for r in reads if r.znode] == [4, 5, 6]


def test_an_answer_with_no_later_read_is_reported_at_once(reader: Any) -> None:
    _, server, emitted = reader
    server.notify(EventType.DELETED, "/brokers/ids/2")
    server.answer("/brokers/ids/2", error=NoNodeError())
    assert [m for m in emitted if isinstance(m, Read)] == [Read("/brokers/ids/2", None, 1_000)]
