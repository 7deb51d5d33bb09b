"""ZooKeeper 3.6+ persistent recursive watches for kazoo, which does not implement them.

One `addWatch(path, PERSISTENT_RECURSIVE)` makes the server send a notification for every
create, data change and delete anywhere under `path`, without re-arming: no blind window between
a notification and the next watch, so every write is announced. kazoo 2.11 has neither the
request (opcode 106) nor a way to route such notifications, so this module supplies the request
and wraps the connection's notification reader to hand every notification to a callback, on the
connection thread as it is read (so a read it triggers goes out in the same turn), before
kazoo's own one-shot dispatch.

The server drops the watch with the connection; kazoo re-sends only its own watches, so the
owner adds it again after each reconnect (the capture daemon re-syncs then anyway)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.protocol.serialization import Watch, int_struct, write_string
from kazoo.protocol.states import EventType

# ZooDefs.OpCode.addWatch and ZooDefs.AddWatchModes.persistentRecursive
ADD_WATCH = 106
PERSISTENT_RECURSIVE = 1

# ZooKeeper's Watcher.Event.EventType numbers, as sent in a notification
_EVENT_TYPES = {1: EventType.CREATED, 2: EventType.DELETED, 3: EventType.CHANGED}

Notify = Callable[[EventType, str], None]


class AddWatch(namedtuple("AddWatch", "path mode")):
    """AddWatchRequest {ustring path; int mode}; the answer is a bare error code."""

    type = ADD_WATCH

    def serialize(self) -> bytearray:
        b = bytearray()
        b.extend(write_string(self.path))
        b.extend(int_struct.pack(self.mode))
        return b

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> bool:
        return True  # an error would have come as the reply header's code


def route_notifications(client: KazooClient, notify: Notify) -> None:
    """Hands `notify(type, path)` every create/change/delete notification the client receives
    (paths without the chroot), on the connection thread, in the order they arrived; `notify`
    must not block."""
    connection = client._connection
    original = connection._read_watch_event

    def read_watch_event(buffer: bytes, offset: int) -> None:
        watch, _ = Watch.deserialize(buffer, offset)
        kind = _EVENT_TYPES.get(watch.type)
        if kind is not None and not client._stopped.is_set():
            notify(kind, client.unchroot(watch.path))
        original(buffer, offset)

    connection._read_watch_event = read_watch_event
