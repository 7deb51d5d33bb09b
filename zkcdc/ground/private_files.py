"""Files zkcdc writes are its operator's: never world-readable, replaced whole or not at all."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# Group may read (a monitoring user in the service's group), others nothing: files 0640 and
# folders 0750 at most, tighter where the operator's umask is.
UMASK_FLOOR = 0o027


def restrict_umask() -> int:
    """Tightens this process's umask (and so its children's: Spark's JVM, the stack's servers)
    to at least UMASK_FLOOR; returns the umask now in force."""
    current = os.umask(0)
    tightened = current | UMASK_FLOOR
    os.umask(tightened)
    return tightened


def fsync_directory(directory: Path) -> None:
    """Makes a new or renamed entry of `directory` durable (a file's own fsync does not)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: Path,
    content: bytes | str | Callable[[BinaryIO], None],
    mode: int = 0o640,
    before_rename: Callable[[], None] = lambda: None,
) -> None:
    """`path` holds the whole new content or its old one, also after a power loss. `content`
    is bytes, text (UTF-8) or a function writing to the stream. OSError propagates; a failed
    write leaves no temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as stream:
            if isinstance(content, str):
                stream.write(content.encode())
            elif isinstance(content, bytes):
                stream.write(content)
            else:
                content(stream)
            stream.flush()
            os.fsync(stream.fileno())
        before_rename()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_directory(path.parent)


def safe_name(name: str) -> str:
    """A name (a cluster's, say) as a file name: anything but letters, digits, - and _ is _."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name) or "_"
