"""Where each process of the stack listens and keeps its files: pure, derived from settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from zkcdc.stack.settings import StackSettings


@dataclass(frozen=True)
class ZookeeperNode:
    node_id: int
    client_port: int
    quorum_port: int
    election_port: int
    home: Path

    @property
    def name(self) -> str:
        return f"zookeeper-{self.node_id}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def config_file(self) -> Path:
        return self.home / "zoo.cfg"


@dataclass(frozen=True)
class KafkaBroker:
    broker_id: int
    port: int
    home: Path

    @property
    def name(self) -> str:
        return f"kafka-{self.broker_id}"

    @property
    def log_dir(self) -> Path:
        return self.home / "data"

    @property
    def config_file(self) -> Path:
        return self.home / "server.properties"


@dataclass(frozen=True)
class KraftController:
    node_id: int
    port: int
    home: Path

    @property
    def name(self) -> str:
        return f"controller-{self.node_id}"

    @property
    def log_dir(self) -> Path:
        return self.home / "data"

    @property
    def metadata_dir(self) -> Path:
        """Its copy of the metadata log (`__cluster_metadata-0`)."""
        return self.log_dir / "__cluster_metadata-0"

    @property
    def config_file(self) -> Path:
        return self.home / "server.properties"


CONTROLLER_IDS = 101  # the first controller's node id: apart from the brokers' 1, 2, 3


@dataclass(frozen=True)
class StackLayout:
    """Ports and paths of every node; the same settings always give the same layout."""

    state_dir: Path
    host: str
    chroot: str
    zookeepers: tuple[ZookeeperNode, ...]
    brokers: tuple[KafkaBroker, ...]
    controllers: tuple[KraftController, ...] = ()

    @classmethod
    def from_settings(cls, settings: StackSettings) -> StackLayout:
        state = settings.state_dir.resolve()
        n = settings.zookeeper_nodes if settings.mode == "zookeeper" else 0
        # Quorum and election ports sit right after the client ports of the ensemble.
        zookeepers = tuple(
            ZookeeperNode(
                node_id=i + 1,
                client_port=settings.zookeeper_port + i,
                quorum_port=settings.zookeeper_port + n + i,
                election_port=settings.zookeeper_port + 2 * n + i,
                home=state / "zookeeper" / str(i + 1),
            )
            for i in range(n)
        )
        brokers = tuple(
            KafkaBroker(
                broker_id=i + 1, port=settings.kafka_port + i, home=state / "kafka" / str(i + 1)
            )
            for i in range(settings.brokers)
        )
        controllers = tuple(
            KraftController(
                node_id=CONTROLLER_IDS + i,
                port=settings.controller_port + i,
                home=state / "controller" / str(i + 1),
            )
            for i in range(settings.controllers if settings.has_controllers else 0)
        )
        return cls(state, settings.host, settings.chroot, zookeepers, brokers, controllers)

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "stack.json"

    @property
    def zookeeper_hosts(self) -> str:
        """The ensemble's connect string without a chroot."""
        return ",".join(f"{self.host}:{z.client_port}" for z in self.zookeepers)

    @property
    def zookeeper_connect(self) -> str:
        """What Kafka and zkcdc connect to: the ensemble plus Kafka's chroot."""
        return self.zookeeper_hosts + self.chroot

    @property
    def quorum_voters(self) -> str:
        """`controller.quorum.voters`: id@host:port of each controller."""
        return ",".join(f"{c.node_id}@{self.host}:{c.port}" for c in self.controllers)

    @property
    def bootstrap_controllers(self) -> str:
        return ",".join(f"{self.host}:{c.port}" for c in self.controllers)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{b.port}" for b in self.brokers)

    def log_file(self, process_name: str) -> Path:
        return self.logs_dir / f"{process_name}.log"

    def ports(self) -> list[tuple[str, int]]:
        """Every port the stack binds, with the process that binds it."""
        out: list[tuple[str, int]] = []
        for z in self.zookeepers:
            out.append((z.name, z.client_port))
            if len(self.zookeepers) > 1:
                out += [(z.name, z.quorum_port), (z.name, z.election_port)]
        out += [(c.name, c.port) for c in self.controllers]
        out += [(b.name, b.port) for b in self.brokers]
        return out

    def controller(self, name: str) -> KraftController:
        for c in self.controllers:
            if c.name == name:
                return c
        raise KeyError(name)

    def broker(self, broker_id: int) -> KafkaBroker:
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        raise KeyError(broker_id)
