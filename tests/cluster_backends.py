"""The clusters the tests run against: local processes (default), an existing cluster, or Docker.

`ZKCDC_TEST_BACKEND=local` (default) starts the real stack with `zkcdc.stack` once per session;
`external` uses the cluster named by `ZKCDC_TEST_ZOOKEEPER` (hosts + chroot) and
`ZKCDC_TEST_BOOTSTRAP_SERVERS`; `docker` runs cp-zookeeper + cp-kafka 7.9 with testcontainers.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Protocol

import psutil

from zkcdc.stack import LocalStack, StackSettings
from zkcdc.stack.probes import free_port_block
from zkcdc.stack.processes import tail

CP_VERSION = "7.9.1"


class ClusterBackend(Protocol):
    zookeeper_hosts: str
    chroot: str
    bootstrap_servers: str
    broker_ids: tuple[int, ...]

    def stop_broker(self, broker_id: int, sig: int = signal.SIGTERM) -> None: ...
    def start_broker(self, broker_id: int) -> None: ...
    def signal_zookeeper(self, sig: int) -> None: ...
    def zookeeper_txnlog_dir(self) -> Path: ...
    def log_tails(self, lines: int = 40) -> dict[str, str]: ...
    def kafka_tool(self, main_class: str, *args: str) -> str: ...
    def close(self) -> None: ...


class LocalBackend:
    def __init__(self, state_dir: Path, brokers: int = 3, attach: bool = False) -> None:
        """A stack started now in `state_dir`; or, with `attach`, the one another process of
        the session started there (it stops it, not this one)."""
        self.owned = not attach
        if attach:
            self.stack = LocalStack.open(state_dir)
            info = self.stack.info()
        else:
            settings = StackSettings(
                state_dir=state_dir,
                brokers=brokers,
                zookeeper_port=free_port_block(3),
                kafka_port=free_port_block(brokers),
            )
            self.stack = LocalStack(settings)
            info = self.stack.up()
        self.zookeeper_hosts = info.zookeeper_hosts
        self.chroot = info.chroot
        self.bootstrap_servers = info.bootstrap_servers
        self.broker_ids = tuple(b.broker_id for b in self.stack.layout.brokers)

    def stop_broker(self, broker_id: int, sig: int = signal.SIGTERM) -> None:
        self.stack.stop_broker(broker_id, sig)

    def start_broker(self, broker_id: int) -> None:
        self.stack.start_broker(broker_id)

    def signal_zookeeper(self, sig: int) -> None:
        """SIGSTOP or SIGCONT to every ZooKeeper server of the stack (a stalled ensemble)."""
        for node in self.stack.layout.zookeepers:
            psutil.Process(self.stack.records()[node.name].pid).send_signal(sig)

    def zookeeper_txnlog_dir(self) -> Path:
        """Where the (first) ZooKeeper server writes its transaction log and snapshots."""
        return self.stack.layout.zookeepers[0].data_dir / "version-2"

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        return {
            name: tail(self.stack.layout.log_file(name), lines) for name in self.stack.records()
        }

    def kafka_tool(self, main_class: str, *args: str) -> str:
        """Runs one of Kafka's command-line tools (kafka-tools) against this cluster."""
        import subprocess

        libs = self.stack.info().kafka_libs
        done = subprocess.run(
            [
                "java",
                "-Xmx256m",
                *self.stack.settings.java_options,
                "-cp",
                f"{libs}/*",
                main_class,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise AssertionError(f"{main_class} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def close(self) -> None:
        if self.owned:
            self.stack.down()


class ExternalBackend:
    """A cluster someone else runs: tests that stop brokers cannot run against it."""

    def __init__(self) -> None:
        connect = os.environ["ZKCDC_TEST_ZOOKEEPER"]
        hosts, slash, chroot = connect.partition("/")
        self.zookeeper_hosts, self.chroot = hosts, (slash + chroot) if chroot else ""
        self.bootstrap_servers = os.environ["ZKCDC_TEST_BOOTSTRAP_SERVERS"]
        self.broker_ids = tuple(
            int(b) for b in os.environ.get("ZKCDC_TEST_BROKER_IDS", "1,2,3").split(",")
        )

    def stop_broker(self, broker_id: int, sig: int = signal.SIGTERM) -> None:
        import pytest

        pytest.skip(
            "ZKCDC_TEST_BACKEND=external: this test stops brokers, which needs local or docker"
        )

    start_broker = stop_broker
    kafka_tool = stop_broker

    def signal_zookeeper(self, sig: int) -> None:
        import pytest

        pytest.skip("ZKCDC_TEST_BACKEND=external: its ZooKeeper is not this machine's to freeze")

    def zookeeper_txnlog_dir(self) -> Path:
        import pytest

        pytest.skip("ZKCDC_TEST_BACKEND=external: ZooKeeper's files are not on this machine")

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass


class DockerBackend:
    """cp-zookeeper + three cp-kafka 7.9 brokers (ZooKeeper mode) in one Docker network."""

    def __init__(self, brokers: int = 3) -> None:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.network import Network
        from testcontainers.core.waiting_utils import wait_for_logs

        self.chroot = "/kafka"
        self._network = Network().create()
        zk_port = free_port_block(1)
        self._zookeeper = (
            DockerContainer(f"confluentinc/cp-zookeeper:{CP_VERSION}")
            .with_network(self._network)
            .with_network_aliases("zookeeper")
            .with_env("ZOOKEEPER_CLIENT_PORT", "2181")
            .with_env("ZOOKEEPER_TICK_TIME", "500")
            .with_bind_ports(2181, zk_port)
            .start()
        )
        wait_for_logs(self._zookeeper, "binding to port", timeout=60)
        self.zookeeper_hosts = f"127.0.0.1:{zk_port}"
        self.broker_ids = tuple(range(1, brokers + 1))
        self._brokers: dict[int, Any] = {}
        ports = free_port_block(brokers)
        for broker_id in self.broker_ids:
            port = ports + broker_id - 1
            self._brokers[broker_id] = (
                DockerContainer(f"confluentinc/cp-kafka:{CP_VERSION}")
                .with_network(self._network)
                .with_network_aliases(f"kafka-{broker_id}")
                .with_env("KAFKA_BROKER_ID", str(broker_id))
                .with_env("KAFKA_ZOOKEEPER_CONNECT", "zookeeper:2181/kafka")
                .with_env("KAFKA_LISTENERS", f"INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:{port}")
                .with_env(
                    "KAFKA_ADVERTISED_LISTENERS",
                    f"INTERNAL://kafka-{broker_id}:29092,EXTERNAL://127.0.0.1:{port}",
                )
                .with_env(
                    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
                )
                .with_env("KAFKA_INTER_BROKER_LISTENER_NAME", "INTERNAL")
                .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", str(min(3, brokers)))
                .with_env("KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS", "6000")
                .with_env("KAFKA_REPLICA_LAG_TIME_MAX_MS", "4000")
                .with_env("KAFKA_HEAP_OPTS", "-Xmx384m -Xms64m")
                .with_bind_ports(port, port)
                .start()
            )
        self.bootstrap_servers = ",".join(f"127.0.0.1:{ports + i}" for i in range(brokers))
        for container in self._brokers.values():
            wait_for_logs(container, r"started \(kafka.server.KafkaServer\)", timeout=120)

    def stop_broker(self, broker_id: int, sig: int = signal.SIGTERM) -> None:
        container = self._brokers[broker_id].get_wrapped_container()
        container.kill(signal=signal.Signals(sig).name)
        if sig not in (signal.SIGSTOP, signal.SIGCONT):
            container.wait(timeout=60)

    def start_broker(self, broker_id: int) -> None:
        self._brokers[broker_id].get_wrapped_container().start()

    def signal_zookeeper(self, sig: int) -> None:
        import pytest

        # One cluster serves every test here: frozen, it would stall the capture under test too.
        pytest.skip("ZKCDC_TEST_BACKEND=docker: one ZooKeeper for the whole run")

    def zookeeper_txnlog_dir(self) -> Path:
        import pytest

        pytest.skip("ZKCDC_TEST_BACKEND=docker: ZooKeeper's files are inside its container")

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        out = {"zookeeper": self._zookeeper}
        out.update({f"kafka-{b}": c for b, c in self._brokers.items()})
        return {
            name: c.get_wrapped_container().logs(tail=lines).decode(errors="replace")
            for name, c in out.items()
        }

    def kafka_tool(self, main_class: str, *args: str) -> str:
        """Kafka's tools inside a broker container (cp-kafka ships the same kafka-tools jar)."""
        container = next(iter(self._brokers.values())).get_wrapped_container()
        code, output = container.exec_run(["kafka-run-class", main_class, *args])
        if code != 0:
            raise AssertionError(f"{main_class} failed: {output.decode(errors='replace')}")
        return str(output.decode())

    def close(self) -> None:
        for container in self._brokers.values():
            container.stop()
        self._zookeeper.stop()
        self._network.remove()


def make_backend(state_dir: Path) -> ClusterBackend:
    kind = os.environ.get("ZKCDC_TEST_BACKEND", "local")
    if kind == "local":
        return LocalBackend(state_dir)
    if kind == "external":
        return ExternalBackend()
    if kind == "docker":
        return DockerBackend()
    raise RuntimeError(f"unknown ZKCDC_TEST_BACKEND={kind!r} (local, external, docker)")
