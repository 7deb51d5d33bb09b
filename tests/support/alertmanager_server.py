"""A real Prometheus Alertmanager for the alert job's tests and demos: Debian's
`prometheus-alertmanager` package (no service started), run by hand on loopback."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

from debian_packages import ensure_binary

from zkcdc.ground import waiting
from zkcdc.ground.child_processes import stop
from zkcdc.stack.errors import StackError

PACKAGE = "prometheus-alertmanager"
CONFIG = """\
global:
  resolve_timeout: {resolve_timeout}
route:
  receiver: "null"
  group_wait: 0s
receivers:
  - name: "null"
"""


def alertmanager_binary() -> Path:
    """Debian's binary (its default templates live at a fixed /usr/share path, so unpacking it
    elsewhere won't do)."""
    return ensure_binary(PACKAGE, PACKAGE)


class Alertmanager:
    """One Alertmanager process on 127.0.0.1:`port`, its data in `work`; `stop()` ends it."""

    def __init__(self, binary: Path, work: Path, port: int, resolve_timeout: str = "5m") -> None:
        self.url = f"http://127.0.0.1:{port}"
        work.mkdir(parents=True, exist_ok=True)
        (work / "alertmanager.yml").write_text(CONFIG.format(resolve_timeout=resolve_timeout))
        self.log_file = work / "alertmanager.log"
        self.process = subprocess.Popen(
            [
                str(binary),
                f"--config.file={work / 'alertmanager.yml'}",
                f"--storage.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",  # one instance: no gossip port
            ],
            stdout=self.log_file.open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            waiting.wait_until(
                self._ready, 30, what="Alertmanager to start", interval_s=0.2,
                abandon=lambda: None if self.process.poll() is None else "it exited",
                detail=lambda: self.log_file.read_text()[-2000:],
            )  # fmt: skip
        except waiting.WaitFailed as exc:
            self.stop()
            raise StackError(str(exc)) from exc

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        stop(self.process, 15)
