"""Writing to ZooKeeper for the simulator: plain write operations, sent as `multi` requests
with many in flight, the way Kafka's controller pipelines its writes.

A write that fails (a conditional version that moved, a node already there) stops the run
with one line naming the znode: the simulator must never leave a tree half-written silently."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError

from zkcdc.capture.watch.kazoo_pipeline import Pipeline
from zkcdc.ground import logs, zookeeper_connection
from zkcdc.ground.connect_timeout import connect_timeout_s
from zkcdc.simulate.errors import SimulateError


@dataclass(frozen=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class Check:
    path: str
    version: int


@dataclass(frozen=True)
class Delete:
    path: str
    version: int = -1


Op = Create | SetData | Check | Delete


def connect(
    hosts: str, timeout_s: float | None = None, session_timeout_s: float = 10.0
) -> KazooClient:
    """A started kazoo client on `host:port[,..][/chroot]`, or a one-line SimulateError."""
    # kazoo's complaints per connection try would print raw on stderr before the one line below.
    quiet = logs.quiet("zkcdc.simulate.kazoo")
    wait_s = connect_timeout_s(15.0) if timeout_s is None else timeout_s
    try:
        # TLS and SASL from ZKCDC_ZOOKEEPER_CONFIG_FILE / ZKCDC_ZOOKEEPER_* (--zookeeper-config-file)
        access = zookeeper_connection.load()
        client = access.client(hosts, session_timeout_s, logger=quiet)
    except zookeeper_connection.ZooKeeperConnectionError as exc:
        raise SimulateError(str(exc)) from exc
    try:
        client.start(timeout=wait_s)
    except (KazooTimeoutError, KazooException) as exc:
        client.close()
        raise SimulateError(
            f"ZooKeeper at {hosts.partition('/')[0]} is unreachable "
            f"(no session within {wait_s:g} s)"
        ) from exc
    return client


def close(client: KazooClient) -> None:
    """Ends the session at once, so its ephemeral znodes go now, not at its timeout."""
    try:
        client.stop()
    finally:
        client.close()


class ZkWriter:
    """Sends batches of operations as `multi` requests, at most `window` in flight."""

    def __init__(
        self,
        client: KazooClient,
        window: int = 32,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self._client = client
        Pipeline(client)  # buffered reads, batched sends: many requests per loop turn
        self._slots = threading.Semaphore(window)
        self._window = window
        self._progress = progress
        self._errors: list[str] = []
        self._lock = threading.Lock()

    def submit(self, ops: Sequence[Op]) -> None:
        """Sends `ops` as one atomic multi; failures surface at the next `flush()`."""
        self._raise_first_error()
        self._slots.acquire()
        try:
            result = self._transaction(ops).commit_async()
        except Exception:
            self._slots.release()
            raise
        result.rawlink(lambda answer: self._done(ops, answer))

    def run(self, ops: Sequence[Op]) -> list[Any]:
        """Sends `ops` as one multi and waits: the results (created paths for creates)."""
        self.flush()
        return run_multi(self._client, ops)

    def flush(self) -> None:
        """Waits for every write in flight; raises the first failure."""
        for _ in range(self._window):
            self._slots.acquire()
        for _ in range(self._window):
            self._slots.release()
        self._raise_first_error()

    def _transaction(self, ops: Sequence[Op]) -> Any:
        return _transaction(self._client, ops)

    def _done(self, ops: Sequence[Op], answer: Any) -> None:
        try:
            results = answer.get_nowait()
            failure = _failure(ops, results)
        except Exception as exc:
            failure = f"ZooKeeper refused a write to {ops[0].path}: {exc!r}"
        if failure:
            with self._lock:
                self._errors.append(failure)
        elif self._progress is not None:
            self._progress(len(ops))
        self._slots.release()

    def _raise_first_error(self) -> None:
        if self._errors:
            raise SimulateError(self._errors[0])


def run_multi(client: KazooClient, ops: Sequence[Op]) -> list[Any]:
    """`ops` as one multi on `client`'s session, waited for: the results (created paths for
    creates), or a SimulateError naming the operation ZooKeeper refused."""
    try:
        results: list[Any] = _transaction(client, ops).commit()
    except KazooException as exc:
        raise SimulateError(f"ZooKeeper refused a write to {ops[0].path}: {exc!r}") from exc
    failure = _failure(ops, results)
    if failure:
        raise SimulateError(failure)
    return results


def _transaction(client: KazooClient, ops: Sequence[Op]) -> Any:
    txn = client.transaction()
    for op in ops:
        if isinstance(op, Create):
            txn.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
        elif isinstance(op, SetData):
            txn.set_data(op.path, op.data, op.version)
        elif isinstance(op, Check):
            txn.check(op.path, op.version)
        else:
            txn.delete(op.path, op.version)
    return txn


def _failure(ops: Sequence[Op], results: Sequence[Any]) -> str | None:
    for op, result in zip(ops, results, strict=False):
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            name = type(result).__name__
            return f"ZooKeeper refused {type(op).__name__.lower()} {op.path}: {name}"
    return None
