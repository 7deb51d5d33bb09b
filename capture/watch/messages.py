"""What crosses from kazoo's threads to the capture's main thread, in order, on one queue."""

from __future__ import annotations

from dataclasses import dataclass

from zkcdc.capture.records import Znode


@dataclass(frozen=True, slots=True)
class Read:
    """A read of `path` answered `znode` (None: no such znode) at `observed_ms`;
    `announced_created`: the read followed ZooKeeper's notice that `path` was created."""

    path: str
    znode: Znode | None
    observed_ms: int
    announced_created: bool = False


@dataclass(frozen=True, slots=True)
class Unreadable:
    """ZooKeeper refused to read `path`'s data, or to list its children (`what`): its ACL
    gives capture's identity no READ. `reason`: ZooKeeper's answer."""

    path: str
    what: str  # "data" or "children"
    reason: str
    observed_ms: int


@dataclass(frozen=True, slots=True)
class Synced:
    """Every read of the tree walk `generation` was answered."""

    generation: int


@dataclass(frozen=True, slots=True)
class Reconnected:
    """A session (the same after a connection loss, or a new one) is connected: kazoo has
    re-armed no watch, so the tree is walked again."""


@dataclass(frozen=True, slots=True)
class Wake:
    """Nothing to read: ends a wait on the queue (a stop)."""


Message = Read | Unreadable | Synced | Reconnected | Wake
