"""The C allocator's arenas, bounded for a long-lived daemon.

glibc gives each new thread an arena of its own, up to eight a core, and keeps what an arena
once held. A daemon whose Kafka and ZooKeeper clients come and go with its terms (each with
threads of its own) then keeps the high-water mark of every arena: its memory climbs in steps
with each takeover and is never given back. Two arenas (glibc's `MALLOC_ARENA_MAX=2`, the usual
setting for such daemons) bound that. An operator's own `MALLOC_ARENA_MAX` is left as it is."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
DAEMON_ARENAS = 2


def bound_arenas(arenas: int = DAEMON_ARENAS) -> bool:
    """Caps the arenas threads made from now on use; True when glibc took the cap. Call it
    before the daemon starts its clients' threads."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt)
    return bool(mallopt(M_ARENA_MAX, arenas))
