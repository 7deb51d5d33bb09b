"""Listing and removing whole subtrees fast: one level at a time, every get_children of a level
in flight together, deletes deepest first in multis. (kazoo's recursive delete makes a round
trip per znode: minutes for a 200,000-partition tree.)"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkcdc.simulate.zk_writer import Delete, ZkWriter

_IN_FLIGHT = 2000


def subtree(client: KazooClient, path: str) -> list[list[str]]:
    """The znodes under `path` (itself included), level by level from the top."""
    levels = [[path]]
    while levels[-1]:
        below: list[str] = []
        level = levels[-1]
        for start in range(0, len(level), _IN_FLIGHT):
            chunk = level[start : start + _IN_FLIGHT]
            answers = [(p, client.get_children_async(p)) for p in chunk]
            for parent, answer in answers:
                try:
                    children = answer.get(timeout=60)
                except NoNodeError:
                    continue  # gone meanwhile: nothing below it either
                prefix = parent.rstrip("/")
                below.extend(f"{prefix}/{c}" for c in children if f"{prefix}/{c}" != "/zookeeper")
        levels.append(below)
    return levels[:-1]


def remove(writer: ZkWriter, client: KazooClient, path: str, keep_root: bool = False) -> int:
    """Deletes `path` and all below it (only what is below with `keep_root`): the count."""
    levels = subtree(client, path)
    if keep_root:
        levels = levels[1:]
    count = 0
    for level in reversed(levels):  # children before their parents
        for start in range(0, len(level), 500):
            chunk = level[start : start + 500]
            writer.submit([Delete(p) for p in chunk])
            count += len(chunk)
        writer.flush()
    return count
