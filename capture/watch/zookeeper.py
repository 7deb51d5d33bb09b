"""Connecting kazoo clients for capture: the chrooted one that reads Kafka's tree, and the
root one that holds the election."""

from __future__ import annotations

import json
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkcdc.capture.errors import CaptureError
from zkcdc.ground.backoff import retried
from zkcdc.ground.zookeeper_connection import ZooKeeperAccess, ZooKeeperConnectionError, split_hosts


class ZooKeeperUnavailable(CaptureError):
    """ZooKeeper cannot be reached, or refuses the session."""


def connect(
    connect_string: str,
    session_timeout_s: float,
    connect_timeout_s: float,
    access: ZooKeeperAccess,
    tries: int | None,
    sleep: Callable[[float], None],
    own_nodes: bool = False,
) -> KazooClient:
    """A started client, after up to `tries` attempts with backoff (None: until it connects,
    `--wait`). `own_nodes`: what it creates (the election's znodes) gets `access.own_acl()`."""

    def attempt() -> KazooClient:
        try:
            client = access.client(connect_string, session_timeout_s, own_nodes=own_nodes)
        except ZooKeeperConnectionError as exc:
            raise CaptureError(str(exc)) from exc
        try:
            client.start(timeout=connect_timeout_s)
            return client
        except (KazooTimeoutError, KazooException) as exc:
            client.close()
            hosts, _ = split_hosts(connect_string)
            how = access.describe()
            refused = f" ({how}: or it refused the session)" if how else ""
            raise ZooKeeperUnavailable(
                f"ZooKeeper at {hosts} is unreachable (no session within "
                f"{connect_timeout_s:g} s){refused}"
            ) from exc

    return retried(attempt, ZooKeeperUnavailable, tries, sleep)


def cluster_id(client: KazooClient, connect_string: str) -> str:
    """Kafka's cluster id from `/cluster/id`, the default name of the captured cluster."""
    try:
        data, _ = client.get("/cluster/id")
        value = json.loads(data)["id"]
    except NoNodeError as exc:
        raise CaptureError(
            f"no /cluster/id at {connect_string}: not Kafka's chroot? (or pass --cluster NAME)"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise CaptureError(f"/cluster/id at {connect_string} is not Kafka's format") from exc
    return str(value)


def newest_zxid(client: KazooClient) -> int:
    """The newest zxid the ensemble has, as the connected server tells it after catching up
    with the leader (`sync`): a follower behind would otherwise look like history gone back."""
    client.sync("/")
    client.exists("/")
    return int(client.last_zxid)


def probe_newest_zxid(connect_string: str, access: ZooKeeperAccess, timeout_s: float) -> int | None:
    """The ensemble's newest zxid through a client of its own that has seen none (a server
    behind what a client has seen refuses that client's session), None if unreachable."""
    try:
        client = access.client(connect_string, timeout_s)
    except ZooKeeperConnectionError:
        return None
    try:
        client.start(timeout=timeout_s)
        return newest_zxid(client)
    except (KazooTimeoutError, KazooException):
        return None
    finally:
        client.stop()
        client.close()
