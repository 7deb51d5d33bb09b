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
