"""The quorum's high watermark, asked of Kafka with its `DescribeQuorum` request (apiKey 55).

The metadata log's files end with records the quorum may not have committed yet: a leader
that fails before a majority holds them takes them away again, and the files do not say how far
the commit has come. The leader does: a broker or controller answers DescribeQuorum with the
quorum's leader, epoch and high watermark (every record below it is committed for good).

Kafka's protocol is spoken here directly (no client library exposes DescribeQuorum): one
request, version 1, on a plain TCP connection (or TLS), kept open between asks."""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.kraft.message_layouts import MessageLayout, StructArray, f
from zkcdc.capture.kraft.message_reader import MessageError, read_message

API_KEY, VERSION = 55, 1
METADATA_TOPIC = "__cluster_metadata"

_REPLICA = (f("ReplicaId", "int32"), f("LogEndOffset", "int64"),
            f("LastFetchTimestamp", "int64", 1), f("LastCaughtUpTimestamp", "int64", 1))  # fmt: skip
RESPONSE = MessageLayout("DescribeQuorumResponse", (0, 1), (
    f("ErrorCode", "int16"),
    f("Topics", StructArray((
        f("TopicName", "string"),
        f("Partitions", StructArray((
            f("PartitionIndex", "int32"), f("ErrorCode", "int16"), f("LeaderId", "int32"),
            f("LeaderEpoch", "int32"), f("HighWatermark", "int64"),
            f("CurrentVoters", StructArray(_REPLICA)), f("Observers", StructArray(_REPLICA)),
        ))),
    ))),
))  # fmt: skip


class QuorumUnavailable(CaptureError):
    """No answer with a high watermark: the quorum, or the way to it, is down."""


@dataclass(frozen=True)
class QuorumStatus:
    leader_id: int
    leader_epoch: int
    high_watermark: int


def _compact_string(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw  # our strings are short: one varint byte


def request(correlation_id: int, client_id: str = "zkcdc") -> bytes:
    """A DescribeQuorum v1 request for `__cluster_metadata-0`, framed with its size."""
    client = client_id.encode()
    header = struct.pack(">hhih", API_KEY, VERSION, correlation_id, len(client)) + client + b"\0"
    body = (
        b"\x02" + _compact_string(METADATA_TOPIC)  # one topic
        + b"\x02" + struct.pack(">i", 0) + b"\0"  # one partition, no tags
        + b"\0"  # the topic's tags
        + b"\0"  # the body's tags
    )  # fmt: skip
    message = header + body
    return struct.pack(">i", len(message)) + message


def parse_response(data: bytes, correlation_id: int) -> QuorumStatus:
    """The response's payload (after its size): header v1 (correlation id, tags), then body."""
    if len(data) < 5:
        raise MessageError("DescribeQuorum response shorter than its header")
    (answered,) = struct.unpack_from(">i", data)
    if answered != correlation_id:
        raise MessageError(f"answer to request {answered}, not {correlation_id}")
    if data[4] != 0:
        raise MessageError("DescribeQuorum response header with tagged fields")
    body = read_message(RESPONSE, VERSION, data, 5)
    if body["ErrorCode"]:
        raise QuorumUnavailable(f"DescribeQuorum answered error code {body['ErrorCode']}")
    for topic in body["Topics"]:
        for partition in topic["Partitions"]:
            if partition["ErrorCode"]:
                code = partition["ErrorCode"]
                raise QuorumUnavailable(f"DescribeQuorum answered error code {code}")
            return QuorumStatus(
                partition["LeaderId"], partition["LeaderEpoch"], partition["HighWatermark"]
            )
    raise QuorumUnavailable("DescribeQuorum answered without the metadata partition")


class QuorumClient:
    """Asks the servers in turn (brokers forward DescribeQuorum to the active controller;
    controllers answer it themselves) until one answers."""

    def __init__(
        self, servers: list[tuple[str, int]], timeout_s: float = 2.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:  # fmt: skip
        if not servers:
            raise ValueError("no server to ask for the quorum's high watermark")
        self._servers = servers
        self._timeout_s = timeout_s
        self._tls = tls
        self._socket: socket.socket | None = None
        self._next = 0
        self._correlation = 0

    def status(self) -> QuorumStatus:
        problems = []
        for _ in range(len(self._servers)):
            try:
                return self._ask()
            except (OSError, MessageError, QuorumUnavailable) as exc:
                host, port = self._servers[self._next]
                problems.append(f"{host}:{port}: {exc}")
                self.close()
                self._next = (self._next + 1) % len(self._servers)
        raise QuorumUnavailable("; ".join(problems))

    def _ask(self) -> QuorumStatus:
        if self._socket is None:
            host, port = self._servers[self._next]
            raw = socket.create_connection((host, port), timeout=self._timeout_s)
            self._socket = (
                raw if self._tls is None else self._tls.wrap_socket(raw, server_hostname=host)
            )
        self._correlation += 1
        self._socket.sendall(request(self._correlation))
        (size,) = struct.unpack(">i", self._read(4))
        return parse_response(self._read(size), self._correlation)

    def _read(self, n: int) -> bytes:
        assert self._socket is not None
        chunks, left = [], n
        while left:
            chunk = self._socket.recv(left)
            if not chunk:
                raise ConnectionError("connection closed mid-answer")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
