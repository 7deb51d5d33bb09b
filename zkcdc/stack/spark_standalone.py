"""A Spark standalone master and its workers (one by default) from the pyspark install, on
loopback: what a user with a real cluster passes to `--master spark://HOST:PORT`, here for
tests, demos and benchmarks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zkcdc.ground import waiting
from zkcdc.ground.child_processes import stop
from zkcdc.stack.errors import StackError
from zkcdc.streaming.job.spark_jars import pyspark_home


class SparkStandalone:
    def __init__(
        self,
        work: Path,
        port: int,
        webui_port: int,
        cores: int = 2,
        workers: int = 1,
        start_timeout_s: float = 180,
    ) -> None:
        """`workers` workers of `cores` cores each; a second one works in `worker-2`, ...
        `start_timeout_s` for each daemon: on two loaded cores a master took more than 60 s to
        be ALIVE (its web UI bound 27 s after launch, and no election yet at 60 s)."""
        self._start_timeout_s = start_timeout_s
        self.master_url = f"spark://127.0.0.1:{port}"
        self._ui = f"http://127.0.0.1:{webui_port}/json/"
        work.mkdir(parents=True, exist_ok=True)
        spark_class = pyspark_home() / "bin" / "spark-class"
        env = {
            **os.environ,
            "SPARK_HOME": str(pyspark_home()),
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        self._processes: list[subprocess.Popen[bytes]] = []
        self.logs = [work / "master.log"]
        self._start(
            [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(webui_port)], self.logs[0], env,
        )  # fmt: skip
        self._wait(lambda status: status.get("status") == "ALIVE", "the master")
        for n in range(1, workers + 1):
            name = "worker" if n == 1 else f"worker-{n}"
            self.logs.append(work / f"{name}.log")
            self._start(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", self.master_url,
                 "--host", "127.0.0.1", "--cores", str(cores), "--memory", "1g",
                 "--webui-port", "0", "--work-dir", str(work / name)], self.logs[-1], env,
            )  # fmt: skip
        self._wait(
            lambda status: (
                sum(w.get("state") == "ALIVE" for w in status.get("workers", [])) >= workers
            ),
            f"{workers} worker(s)",
        )

    def _start(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        self._processes.append(
            subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
        )

    def _wait(self, ready: Callable[[Any], bool], what: str) -> None:
        def up() -> bool:
            try:
                with urllib.request.urlopen(self._ui, timeout=2) as response:
                    return bool(ready(json.loads(response.read())))
            except OSError:
                return False

        def exited() -> str | None:
            return (
                "a process exited" if any(p.poll() is not None for p in self._processes) else None
            )

        try:
            waiting.wait_until(up, self._start_timeout_s, what=f"Spark standalone: {what}",
                               interval_s=0.5, abandon=exited)  # fmt: skip
        except waiting.WaitFailed as exc:
            tail = "\n".join(log.read_text(errors="replace")[-1500:] for log in self.logs
                             if log.exists())  # fmt: skip
            self.stop()
            raise StackError(f"{exc}:\n{tail}") from exc

    def stop(self) -> None:
        for process in reversed(self._processes):
            stop(process, 20)
