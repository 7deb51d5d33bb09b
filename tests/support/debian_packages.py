"""Tools the tests and benchmarks take from Debian's packages (Alertmanager, promtool,
systemd-analyze, docker-compose): installed with apt-get the first time, when running as root."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from zkcdc.ground.fill_lock import filling
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.stack.errors import StackError


def ensure_binary(name: str, package: str) -> Path:
    """The path of `name`, from Debian's `package` if it is not on PATH yet."""
    found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")
    if found:
        return Path(found)
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise StackError(f"{name} is missing: apt-get install {package}")
    with filling(default_cache_dir(), "apt-get"):  # dpkg takes one install at a time
        found = shutil.which(name, path="/usr/bin:/usr/sbin")
        return Path(found) if found else _install(name, package)


def _install(name: str, package: str) -> Path:
    install = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", package],
        capture_output=True,
        text=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    found = shutil.which(name, path="/usr/bin:/usr/sbin")
    if install.returncode != 0 or not found:
        reason = (install.stderr.strip().splitlines() or [f"no {name} after install"])[-1]
        raise StackError(f"apt-get install {package} failed: {reason}")
    return Path(found)
