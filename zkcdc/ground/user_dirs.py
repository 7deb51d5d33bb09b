"""Where zkcdc keeps things of a user's between runs (XDG folders)."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """Downloaded jars: `ZKCDC_CACHE_DIR`, else `$XDG_CACHE_HOME/zkcdc`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("ZKCDC_CACHE_DIR") or Path(base) / "zkcdc")


def state_home() -> Path:
    """Checkpoints, replay positions and the local stack: `$XDG_STATE_HOME/zkcdc`."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "zkcdc"
