"""Readiness probes: is a port free, is a ZooKeeper node serving, which brokers are registered."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import ssl
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.zookeeper_connection import ZooKeeperAccess
from zkcdc.stack.errors import StackError


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _ephemeral_ports_start(default: int = 32768) -> int:
    """The lowest port the kernel hands out as a connection's own: a server stopped and
    started again must not find its port taken by some client's outgoing connection."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def port_range(environ: Mapping[str, str] = os.environ) -> tuple[int, int]:
    """Where free ports are looked for: away from the 2181/9092 defaults and below the kernel's
    ephemeral range, or the `ZKCDC_PORT_RANGE=LOW-HIGH` given (processes that start servers side
    by side, such as parallel test workers, each take a range of their own)."""
    given = environ.get("ZKCDC_PORT_RANGE", "")
    low_text, dash, high_text = given.partition("-")
    if dash and low_text.isdigit() and high_text.isdigit():
        low, high = int(low_text), int(high_text)
        if 1024 <= low < high <= 65535:
            return low, high
    top = min(_ephemeral_ports_start(), 60000)
    return (10000 if top > 12000 else 1024), top


# Ports this process handed out lately, with when: a block is free when asked for, but not
# bound until its server has started, seconds later; a second block asked for meanwhile (the
# next server of the same stack, say) must not be given the same ports.
_HANDED_OUT: dict[int, float] = {}
_HOLD_S = 600.0


def free_port_block(count: int, host: str = "127.0.0.1") -> int:
    """A first port of `count` consecutive free ports in `port_range()`, none of them handed
    out by this process in the last ten minutes."""
    low, top = port_range()
    now = time.monotonic()
    for port, when in list(_HANDED_OUT.items()):
        if now - when > _HOLD_S:
            del _HANDED_OUT[port]
    for _ in range(200):
        base = random.randrange(low, top - count)
        block = range(base, base + count)
        if not any(p in _HANDED_OUT for p in block) and all(port_is_free(host, p) for p in block):
            _HANDED_OUT.update(dict.fromkeys(block, now))
            return base
    raise StackError(f"no block of {count} free ports found on {host}")


def free_port(host: str = "127.0.0.1") -> int:
    """A free port below the kernel's ephemeral range. A port the kernel hands out (a bind to
    port 0) may also become a connection's own: a client that polls it before its server
    listens can then connect to itself, and take that for the server answering."""
    return free_port_block(1, host)


def four_letter_word(
    host: str, port: int, word: str, timeout_s: float = 2.0, ca: Path | None = None
) -> str | None:
    """ZooKeeper's answer to a four-letter word (over TLS when `ca` is given), or None when
    nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as plain:
            sock = plain
            if ca is not None:
                sock = ssl.create_default_context(cafile=str(ca)).wrap_socket(
                    plain, server_hostname=host
                )
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except (OSError, ssl.SSLError):
        return None
    return b"".join(chunks).decode(errors="replace")


def zookeeper_mode(host: str, port: int, ca: Path | None = None) -> str | None:
    """`standalone`, `leader` or `follower` once the node serves clients; None before."""
    answer = four_letter_word(host, port, "srvr", ca=ca)
    if not answer:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


@contextlib.contextmanager
def zookeeper_client(
    hosts: str, access: ZooKeeperAccess | None = None, timeout_s: float = 10.0
) -> Iterator[KazooClient]:
    client = (access or ZooKeeperAccess()).client(hosts, timeout_s)
    try:
        client.start(timeout=timeout_s)
    except (KazooTimeoutError, KazooException) as exc:
        client.close()
        raise StackError(f"ZooKeeper at {hosts} is not reachable") from exc
    try:
        yield client
    finally:
        client.stop()
        client.close()


def registered_brokers(client: KazooClient, chroot: str) -> set[int]:
    try:
        return {int(child) for child in client.get_children(f"{chroot}/brokers/ids")}
    except NoNodeError:
        return set()


def admin_api_brokers(kafka: KafkaConnection, timeout_s: float = 5.0) -> set[int]:
    """Broker ids the Admin API reports, or an empty set when no broker answers yet."""
    admin = kafka.admin()
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except Exception:  # any client error here means the cluster is not answering yet
        return set()
    return set(metadata.brokers)


def brokers_each_sees(
    kafka: KafkaConnection, addresses: dict[int, str], timeout_s: float = 5.0
) -> dict[int, set[int]]:
    """The broker ids each broker's own metadata lists, asked of that broker alone (a client
    bootstrapped with its address only asks it first). Brokers learn of one another at their
    own pace; a client told of a broker by one and not by another drops its requests to it."""
    return {
        broker_id: admin_api_brokers(
            kafka.model_copy(update={"bootstrap_servers": address}), timeout_s
        )
        for broker_id, address in addresses.items()
    }
