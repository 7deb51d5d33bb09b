"""Files that hold secrets (a Kafka or ZooKeeper client config with a password, a web config's
password hashes, a TLS key) must not be readable by every user of the machine: as ssh does for
a key and libpq for a .pgpass, zkcdc says so, naming the file and its mode, once per file.

It warns rather than refuses: group-readable (0640, what zkcdc writes itself) is fine, and a
deployment that mounts a secret world-readable (a Kubernetes Secret's default 0644) still runs,
loudly."""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from zkcdc.ground import logs

log = logs.get("zkcdc.secrets")
_warned: set[Path] = set()


def readable_by_all(path: Path) -> int | None:
    """The file's permission bits when every user may read it, else None (or unknown)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    return mode if mode & stat.S_IROTH else None


def check_secret_file(
    path: Path, holds: Iterable[str], warn: Callable[..., Any] | None = None
) -> bool:
    """Warns once when `path`, holding `holds` (names of what is secret in it), is readable by
    every user. Returns whether it is."""
    secrets = sorted(set(holds))
    mode = readable_by_all(path) if secrets else None
    if mode is None:
        return False
    resolved = path.resolve()
    if resolved not in _warned:
        _warned.add(resolved)
        (warn or log.warning)(
            f"{path} holds secrets ({', '.join(secrets)}) and every user may read it "
            f"(mode {mode:04o}): chmod 600 {path}",
            file=str(path), mode=f"{mode:04o}", holds=secrets,
        )  # fmt: skip
    return True
