"""Many ZooKeeper messages per system call on a kazoo connection.

kazoo's connection thread handles one message per loop turn and builds a fresh selector for
every read and write (three per answer). A watcher answering a notification per write
receives thousands of messages a second, and that per-message cost, not ZooKeeper, then sets
its lag. `Pipeline(client)` changes one client's connection (kazoo 2.11, pinned) so that:

- requests made on the connection thread itself (from a notification or an answer) are written
  to the socket in the same turn, batched, without the hop through kazoo's request queue, and
  answers are handed to a plain callback on the connection thread (no completion-thread hop),
  so every answer is seen in exactly the order ZooKeeper sent it;
- reads come from a buffer filled by large `recv`s, and every complete message in the buffer is
  handled in the same turn (a message left in the buffer would otherwise wait for the next
  bytes on the socket, which select cannot see);
- every queued request is sent in the same turn, not one per turn.

Framing, errors, timeouts, pings and reconnects stay kazoo's: only where bytes are taken from
and how many requests go out per turn change."""

from __future__ import annotations

import select
import ssl
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionDropped
from kazoo.protocol.connection import CLOSE_RESPONSE
from kazoo.protocol.serialization import int_struct

_RECV_BYTES = 256 * 1024
_MAX_SENDS_PER_TURN = 1024  # then answers get their turn again


class _Buffer:
    def __init__(self) -> None:
        self.data = bytearray()
        self.pos = 0

    def clear(self) -> None:
        self.data = bytearray()
        self.pos = 0

    def available(self) -> int:
        return len(self.data) - self.pos

    def take(self, length: int) -> bytes:
        out = bytes(self.data[self.pos : self.pos + length])
        self.pos += length
        if self.pos > _RECV_BYTES:  # compact now and then, not on every message
            del self.data[: self.pos]
            self.pos = 0
        return out

    def has_message(self) -> bool:
        if self.available() < 4:
            return False
        return self.available() >= 4 + int(int_struct.unpack_from(self.data, self.pos)[0])


OnAnswer = Callable[[Any, Exception | None], None]


class _Answer:
    """What kazoo calls `async_object`: hands the answer (or error) to `on_answer` at once."""

    __slots__ = ("on_answer",)

    def __init__(self, on_answer: OnAnswer) -> None:
        self.on_answer = on_answer

    def set(self, value: Any) -> None:
        self.on_answer(value, None)

    def set_exception(self, exception: Exception) -> None:
        self.on_answer(None, exception)


class Pipeline:
    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._conn = conn = client._connection
        self._buffer = _Buffer()
        self._out: list[bytes] = []
        self._loop_thread: int | None = None
        self._original_connect = conn._connect
        self._original_read_socket = conn._read_socket
        self._original_send_request = conn._send_request
        conn._connect = self._connect
        conn._read = self._read
        conn._read_socket = self._read_socket
        conn._send_request = self._send_request

    def request(self, request: Any, on_answer: OnAnswer) -> None:
        """Sends a kazoo request object (path with the chroot); `on_answer(value, error)` runs
        on the connection thread, in answer order, and must not block."""
        answer = _Answer(on_answer)
        if threading.get_ident() != self._loop_thread:
            self._client._call(request, answer)
            return
        conn = self._conn
        conn._xid = (conn._xid % 2147483647) + 1
        body = int_struct.pack(conn._xid) + int_struct.pack(request.type) + request.serialize()
        self._out.append(int_struct.pack(len(body)) + body)
        self._client._pending.append((request, answer, conn._xid))

    # -- kazoo's connection, patched --------------------------------------------------------
    def _connect(self, *args: Any) -> Any:
        self._buffer.clear()  # bytes and requests of an earlier connection mean nothing here
        self._out.clear()
        return self._original_connect(*args)

    def _read(self, length: int, timeout: float) -> bytes:
        conn, buffer = self._conn, self._buffer
        with conn._socket_error_handling():
            while buffer.available() < length:
                sock = conn._socket
                pending = hasattr(sock, "pending") and sock.pending() > 0  # SSL's own buffer
                if not pending and not select.select([sock], [], [], timeout)[0]:
                    raise conn.handler.timeout_exception("socket time-out during read")
                try:
                    chunk = sock.recv(max(_RECV_BYTES, length - buffer.available()))
                except ssl.SSLError as e:
                    if e.errno in (ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_WANT_WRITE):
                        continue
                    raise
                except BlockingIOError:
                    continue  # woken without data: select again
                if chunk == b"":
                    raise ConnectionDropped("socket connection broken")
                buffer.data.extend(chunk)
            return buffer.take(length)

    def _read_socket(self, read_timeout: float) -> Any:
        self._loop_thread = threading.get_ident()
        while True:
            try:
                response = self._original_read_socket(read_timeout)
            except BaseException:
                self._out.clear()  # the connection is gone; a re-sync follows
                raise
            if response == CLOSE_RESPONSE or not self._buffer.has_message():
                break
        if self._out:
            out = b"".join(self._out)
            self._out.clear()
            self._conn._write(out, read_timeout)
        return response

    def _send_request(self, read_timeout: float, connect_timeout: float) -> None:
        self._original_send_request(read_timeout, connect_timeout)
        wakeups = self._conn._read_sock
        for _ in range(_MAX_SENDS_PER_TURN):
            # Each queued request has its wake-up byte; send while both are there.
            if not self._client._queue or not select.select([wakeups], [], [], 0)[0]:
                return
            self._original_send_request(read_timeout, connect_timeout)
