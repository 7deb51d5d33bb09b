"""A daemon's threads share two allocator arenas, not one each: memory its clients' threads
once held (a takeover's reads) is used again by the next term's threads, not kept as well."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from zkcdc.ground import allocator

_THREADS_ALLOCATING = r"""
import ctypes, ctypes.util, re, sys, tempfile, threading
from zkcdc.ground import allocator
bounded = allocator.bound_arenas() if sys.argv[1] == "bounded" else None
start = threading.Barrier(12)
def work():
    start.wait()  # all at once: each thread asks for its arena while the others hold theirs
    held = [bytearray(50_000) for _ in range(20)]
    start.wait()
threads = [threading.Thread(target=work) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile() as out:
    f = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(f)); libc.fclose(ctypes.c_void_p(f))
    print(bounded, len(re.findall(r'<heap nr="', open(out.name).read())))
"""


def _arenas(mode: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", _THREADS_ALLOCATING, mode], env=env,
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return out[0], int(out[1])


def test_threads_of_a_bounded_daemon_share_two_arenas_where_they_would_take_one_each() -> None:
    assert _arenas("bounded") == ("True", allocator.DAEMON_ARENAS)
    unbounded = _arenas("unbounded")[1]
    assert unbounded > allocator.DAEMON_ARENAS, "the threads took no arenas of their own"


def test_an_operators_own_arena_setting_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert allocator.bound_arenas() is False
