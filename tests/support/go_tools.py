"""Tools the tests take from the Go module proxy (helm, to lint and render the chart): built
once with `go install` into zkcdc's cache, under the cache's fill lock."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from zkcdc.ground.fill_lock import filling
from zkcdc.ground.user_dirs import default_cache_dir
from zkcdc.stack.errors import StackError

HELM = "helm.sh/helm/v3/cmd/helm@v3.22.0"


def ensure_go_binary(name: str, module: str, timeout_s: float = 1800) -> Path:
    """The path of `name` built from `module` (path@version), building it the first time."""
    folder = default_cache_dir() / "go-bin" / module.replace("/", "_").replace("@", "-")
    built = folder / name
    if built.exists():
        return built
    go = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin:/usr/lib/go/bin")
    if go is None:
        raise StackError(f"{name} is missing and there is no Go to build it: go install {module}")
    with filling(default_cache_dir(), f"go-{name}"):
        if built.exists():
            return built
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [go, "install", module], capture_output=True, text=True, timeout=timeout_s,
            env={**os.environ, "GOBIN": str(folder), "CGO_ENABLED": "0"},
        )  # fmt: skip
        if done.returncode != 0 or not built.exists():
            reason = (done.stderr.strip().splitlines() or ["no binary after it"])[-1]
            raise StackError(f"go install {module} failed: {reason}")
    return built
