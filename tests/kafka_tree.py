"""Reading Kafka's own znodes in tests, with kazoo and nothing of zkcdc's."""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


def read_json(zk: KazooClient, path: str) -> Any:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return json.loads(data)


def partition_state(zk: KazooClient, topic: str, partition: int) -> dict[str, Any] | None:
    state: dict[str, Any] | None = read_json(
        zk, f"/brokers/topics/{topic}/partitions/{partition}/state"
    )
    return state


def controller_id(zk: KazooClient) -> int | None:
    controller = read_json(zk, "/controller")
    return None if controller is None else int(controller["brokerid"])


def controller_epoch(zk: KazooClient) -> int:
    return int(read_json(zk, "/controller_epoch"))


def registered_brokers(zk: KazooClient) -> set[int]:
    return {int(b) for b in zk.get_children("/brokers/ids")}


def full_isr(zk: KazooClient, topic: str, partition: int, size: int) -> dict[str, Any]:
    """Waits until the partition's ISR has `size` replicas; its state then."""
    from conftest import wait_until

    state: dict[str, Any] = wait_until(  # type: ignore[assignment]
        lambda: (s := partition_state(zk, topic, partition)) and len(s["isr"]) == size and s,
        what=f"{topic}-{partition} with a full ISR",
    )
    return state


def restart_broker(cluster: Any, zk: KazooClient, broker_id: int) -> None:
    """Starts a stopped broker again and waits for its registration."""
    from conftest import wait_until

    cluster.start_broker(broker_id)
    wait_until(lambda: broker_id in registered_brokers(zk), what=f"broker {broker_id} back")
