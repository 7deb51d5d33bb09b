"""zkcdc's own znodes are locked down: with ZooKeeper auth, the election's znodes may be
changed or deleted only by the daemons' identity; and an active daemon whose lock node is
deleted steps down at once (a standby takes over), so two actives never run."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl

pytestmark = pytest.mark.integration

AUTH = "zkcdc:election-pw-7d1e"


def _client(hosts: str, auth: str | None = None) -> KazooClient:
    client = KazooClient(hosts=hosts, auth_data=[("digest", auth)] if auth else None)
    client.start(30)
    return client


def test_an_anonymous_client_can_neither_delete_nor_write_the_election_and_a_deleted_lock_steps_the_active_down_to_standby(
    cluster: Any, zk_chroot: Any, start_capture: Any, changes_topic: Any
) -> None:
    ha = f"/zkcdc-tests/acl-{uuid.uuid4().hex[:8]}"
    env = {"ZKCDC_ZOOKEEPER_AUTH": AUTH}
    connect = cluster.zookeeper_hosts + zk_chroot.chroot
    active = start_capture(connect, "--cluster", "c1", "--ha-path", ha, env=env,
                           publish_to=changes_topic)  # fmt: skip
    active.wait_logged("in sync")
    standby = start_capture(connect, "--cluster", "c1", "--ha-path", ha, env=env,
                            publish_to=changes_topic)  # fmt: skip
    standby.wait_logged("standby")

    anonymous = _client(cluster.zookeeper_hosts)
    owner = _client(cluster.zookeeper_hosts, AUTH)
    try:
        election = f"{ha}/c1"
        # Reading stays open. The lowest sequence holds the lock: the active's (the standby's
        # contender node queues behind it).
        nodes = sorted(anonymous.get_children(election), key=lambda n: n[-10:])
        lock = f"{election}/{nodes[0]}"
        for attempt in (
            lambda: anonymous.delete(lock),
            lambda: anonymous.set(lock, b"x"),
            lambda: anonymous.create(f"{election}/intruder", b""),
            lambda: anonymous.create(f"{ha}/other-cluster", b""),
            lambda: anonymous.set_acls(lock, [make_acl("world", "anyone", all=True)]),
        ):
            with pytest.raises(NoAuthError):
                attempt()
        assert anonymous.exists(lock) is not None

        owner.delete(lock)  # as a careless operator with the daemons' identity would
        active.wait_logged("stepped down", timeout_s=30)
        assert any("lock node is gone" in str(line.get("event")) for line in active.log_lines())
        standby.wait_logged("capturing", timeout_s=30)
        zk_chroot.create("/after-takeover", b"1")
        changes_topic.wait_for(lambda r: r["path"] == "/after-takeover", "the standby's record")
        active.wait_logged("standby")  # it campaigns again rather than exit
        assert standby.stop() == 0, standby.tail()
        assert active.stop() == 0, active.tail()
    finally:
        for client in (anonymous, owner):
            client.stop()
            client.close()
