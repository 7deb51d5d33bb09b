"""`LocalStack`: fetch, lay out, start, inspect and stop a local ZooKeeper + Kafka cluster."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kazoo.security import make_acl

from zkcdc.capture.kraft.metadata_dir import load_image
from zkcdc.capture.kraft.quorum_client import QuorumClient, QuorumUnavailable
from zkcdc.ground import kafka_connection, zookeeper_connection
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.maven_jars import ArtifactCache
from zkcdc.ground.private_files import atomic_write
from zkcdc.ground.zookeeper_connection import ZooKeeperAccess
from zkcdc.stack import configs, probes
from zkcdc.stack.cluster_view import ClusterView, kraft_cluster_view, read_cluster_view
from zkcdc.stack.errors import StackError
from zkcdc.stack.kafka_jars import kafka_jars
from zkcdc.stack.layout import StackLayout
from zkcdc.stack.processes import (
    ProcessRecord,
    created,
    find_marked,
    is_running,
    java_command,
    spawn,
    tail,
    terminate,
)
from zkcdc.stack.schema_registry import API as REGISTRY_API
from zkcdc.stack.schema_registry import MAIN_CLASS as REGISTRY_MAIN
from zkcdc.stack.schema_registry import registry_answers, registry_jar
from zkcdc.stack.secure import (
    BROKER_ZK_USER,
    CLIENT_USER,
    INTER_BROKER_USER,
    SecureMaterial,
    scram_user_znode,
)
from zkcdc.stack.settings import StackSettings
from zkcdc.streaming.job.spark_jars import spark_jar_set

REGISTRY = "schema-registry"


def new_cluster_id(random_bytes: Callable[[int], bytes] = os.urandom) -> str:
    """A cluster id as Kafka's `Uuid.randomUuid` makes one: 16 random bytes in URL-safe
    base64, never starting with "-" (command lines would take it for an option) and never
    the all-zero or metadata-topic ids Kafka reserves."""
    reserved = {bytes(16), bytes(15) + b"\x01"}
    while True:
        raw = random_bytes(16)
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if raw not in reserved and not text.startswith("-"):
            return text


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class StackInfo:
    """How to reach a running stack, and where its jars are."""

    zookeeper_connect: str
    zookeeper_hosts: str
    chroot: str
    bootstrap_servers: str
    state_dir: Path
    kafka_libs: Path
    spark_jars: tuple[Path, ...]
    # --secure: the connection settings of zkcdc's commands (--kafka-config-file and
    # --zookeeper-config-file), secrets inside, mode 0600.
    kafka_config_file: Path | None = None
    zookeeper_config_file: Path | None = None
    schema_registry_url: str | None = None  # what --schema-registry takes
    mode: str = "zookeeper"
    # --mode kraft: the controllers (host:port) and their copies of the metadata log.
    bootstrap_controllers: str = ""
    metadata_log_dirs: tuple[Path, ...] = ()


class LocalStack:
    def __init__(
        self,
        settings: StackSettings,
        *,
        announce: Callable[[str], None] = _to_stderr,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.layout = StackLayout.from_settings(settings)
        self.artifacts = ArtifactCache(settings.cache_dir)
        self._announce = announce
        self._sleep = sleep
        self._now = now
        self._records: dict[str, ProcessRecord] = {}
        self._spark_jars: tuple[Path, ...] = ()
        self._secure: SecureMaterial | None = None

    @classmethod
    def open(cls, state_dir: Path, **kwargs: object) -> LocalStack:
        """The stack recorded in `state_dir`, with the settings it was started with."""
        state_file = state_dir.resolve() / "stack.json"
        try:
            saved = json.loads(state_file.read_text())
        except FileNotFoundError as exc:
            raise StackError(f"no stack in {state_dir}: run 'zkcdc stack up' first") from exc
        except (OSError, ValueError) as exc:
            raise StackError(f"unreadable stack state {state_file}: {exc}") from exc
        stack = cls(StackSettings(**saved["settings"]), **kwargs)  # type: ignore[arg-type]
        stack._records = {n: ProcessRecord.from_json(r) for n, r in saved["processes"].items()}
        stack._spark_jars = tuple(Path(p) for p in saved.get("spark_jars", []))
        return stack

    # ---- what is recorded ---------------------------------------------------------------
    def records(self) -> dict[str, ProcessRecord]:
        return dict(self._records)

    def running(self) -> dict[str, bool]:
        return {name: is_running(r) for name, r in self._records.items()}

    def info(self) -> StackInfo:
        folder = self.layout.state_dir / "secure"
        secure = SecureMaterial(folder, {}) if self.settings.secure else None
        return StackInfo(
            zookeeper_connect=self.layout.zookeeper_connect,
            zookeeper_hosts=self.layout.zookeeper_hosts,
            chroot=self.layout.chroot,
            bootstrap_servers=self.layout.bootstrap_servers,
            state_dir=self.layout.state_dir,
            kafka_libs=self.artifacts.folder(kafka_jars(self.settings.kafka_version)),
            spark_jars=self._spark_jars,
            kafka_config_file=secure.kafka_properties if secure else None,
            zookeeper_config_file=secure.zookeeper_properties if secure else None,
            schema_registry_url=self._registry_url(),
            mode=self.settings.mode,
            bootstrap_controllers=self.layout.bootstrap_controllers,
            metadata_log_dirs=tuple(c.metadata_dir for c in self.layout.controllers),
        )

    def _registry_url(self) -> str | None:
        if not self.settings.schema_registry:
            return None
        return f"http://{self.layout.host}:{self.settings.schema_registry_port}{REGISTRY_API}"

    @property
    def secure(self) -> SecureMaterial | None:
        if not self.settings.secure:
            return None
        if self._secure is None:
            self._secure = SecureMaterial.load(self.layout.state_dir / "secure")
        return self._secure

    def zookeeper_access(self) -> ZooKeeperAccess:
        """How zkcdc's own clients (and this stack's probes) reach its ZooKeeper."""
        secure = self.secure
        if secure is None:
            return ZooKeeperAccess()
        return zookeeper_connection.load(secure.zookeeper_properties, environ={})

    def kafka(self) -> KafkaConnection:
        secure = self.secure
        if secure is None:
            return KafkaConnection(bootstrap_servers=self.layout.bootstrap_servers)
        found = kafka_connection.load(None, secure.kafka_properties, {}, environ={})
        assert found is not None
        return found

    def _save(self) -> None:
        self.layout.state_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "settings": self.settings.model_dump(mode="json"),
            "zookeeper_connect": self.layout.zookeeper_connect,
            "bootstrap_servers": self.layout.bootstrap_servers,
            "spark_jars": [str(p) for p in self._spark_jars],
            "processes": {n: r.to_json() for n, r in self._records.items()},
        }
        atomic_write(self.layout.state_file, json.dumps(state, indent=1))

    # ---- up -----------------------------------------------------------------------------
    def fetch(self) -> StackInfo:
        """Download Kafka's and Spark's jars unless the cache has them already."""
        self.artifacts.fetch(kafka_jars(self.settings.kafka_version), self._announce)
        self._spark_jars = tuple(self.artifacts.fetch(spark_jar_set(), self._announce))
        if self.settings.schema_registry:
            registry_jar(self.settings.cache_dir, self._announce)
        return self.info()

    def up(self) -> StackInfo:
        if shutil.which("java") is None:
            raise StackError("java not found on PATH: install a Java 17 runtime")
        if self._resume_if_running():
            return self.info()
        if self.settings.secure and self.settings.mode == "kraft":
            raise StackError("--secure is for the ZooKeeper-mode stack only (not --mode kraft)")
        self._check_ports()
        self.fetch()
        self._prepare_dirs()
        try:
            for node in self.layout.zookeepers:
                self._start(node.name)
            self._wait_for_zookeeper()
            if self.secure is not None:
                self._create_scram_users(self.secure)
            for controller in self.layout.controllers:
                self._start(controller.name)
            self._wait_for_quorum()
            for broker in self.layout.brokers:
                self._start(broker.name)
            self._wait_for_brokers({b.broker_id for b in self.layout.brokers})
            if self.settings.schema_registry:
                self._start(REGISTRY)
                self._wait_for_registry()
        except BaseException:
            self.down()
            raise
        return self.info()

    def _resume_if_running(self) -> bool:
        if self.layout.state_file.exists():
            previous = LocalStack.open(self.layout.state_dir)
            alive = previous.running()
            if alive and all(alive.values()):
                self._records, self._spark_jars = previous._records, previous._spark_jars
                self.layout = previous.layout
                self._announce(f"stack in {self.layout.state_dir} is already running")
                return True
            if any(alive.values()):
                down = ", ".join(n for n, ok in alive.items() if not ok)
                raise StackError(
                    f"stack is partly running ({down} down): run 'zkcdc stack down' first"
                )
        orphans = find_marked(self.layout.state_dir)
        if orphans:
            raise StackError(
                f"processes of an earlier stack still run (pids {orphans}): run 'zkcdc stack down'"
            )
        return False

    def _check_ports(self) -> None:
        ports = self.layout.ports()
        if self.settings.schema_registry:
            ports.append((REGISTRY, self.settings.schema_registry_port))
        for name, port in ports:
            if not probes.port_is_free(self.layout.host, port):
                raise StackError(
                    f"port {port} ({name}) is already in use: stop what uses it or choose "
                    "other ports (--zookeeper-port / --kafka-port / --schema-registry-port)"
                )

    def _prepare_dirs(self) -> None:
        """Each `up` starts an empty cluster: earlier data and logs are removed."""
        for sub in ("zookeeper", "kafka", "controller", "logs"):
            shutil.rmtree(self.layout.state_dir / sub, ignore_errors=True)
        shutil.rmtree(self.layout.state_dir / "secure", ignore_errors=True)
        self.layout.logs_dir.mkdir(parents=True)
        self._records = {}
        secure = None
        if self.settings.secure:
            secure = SecureMaterial.create(
                self.layout.state_dir / "secure", self.layout.bootstrap_servers
            )
            self._secure = secure
        log4j = configs.log4j_config(self.settings.log_levels)
        for node in self.layout.zookeepers:
            node.data_dir.mkdir(parents=True)
            (node.data_dir / "myid").write_text(f"{node.node_id}\n")
            config = configs.zookeeper_config(self.layout, node, self.settings, secure)
            atomic_write(node.config_file, config)
            (node.home / "log4j.properties").write_text(log4j)
        for broker in self.layout.brokers:
            broker.log_dir.mkdir(parents=True)
            config = configs.broker_config(self.layout, broker, self.settings, secure)
            atomic_write(broker.config_file, config, mode=0o600)  # the inter-broker password
            (broker.home / "log4j.properties").write_text(log4j)
        for controller in self.layout.controllers:
            controller.log_dir.mkdir(parents=True)
            config = configs.controller_config(self.layout, controller, self.settings)
            atomic_write(controller.config_file, config)
            (controller.home / "log4j.properties").write_text(log4j)
        if self.settings.mode == "kraft":
            self.format_kraft_storage()
        self._save()

    def format_kraft_storage(
        self, cluster_id: str | None = None, homes: list[Path] | None = None
    ) -> None:
        """`kafka-storage format` of every node's log dir with one new cluster id (or, for a
        migration, the controllers' with the ZooKeeper cluster's)."""
        cluster_id = cluster_id or new_cluster_id()
        if homes is None:
            homes = [c.home for c in self.layout.controllers]
            homes += [b.home for b in self.layout.brokers]
        for home in homes:
            command = java_command(
                heap_mb=128,
                classpath=[self.info().kafka_libs / "*"],
                main_class="kafka.tools.StorageTool",
                # `=`: an id read from ZooKeeper may start with "-", which the tool's
                # parser would take for an option.
                args=[
                    "format",
                    f"--cluster-id={cluster_id}",
                    "-c",
                    str(home / "server.properties"),
                ],
                state_dir=self.layout.state_dir,
                log4j_file=home / "log4j.properties",
                logs_dir=self.layout.logs_dir,
                options=self.settings.java_options,
            )
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                said = (done.stderr.strip() or done.stdout.strip())[-2000:]
                raise StackError(
                    f"kafka-storage format of {home} failed (exit {done.returncode}):\n{said}"
                )

    def _command(self, name: str) -> list[str]:
        if name == REGISTRY:
            return self._registry_command()
        kind, _, number = name.partition("-")
        if kind == "zookeeper":
            home = self.layout.zookeepers[int(number) - 1].home
            main, heap = (
                "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                self.settings.zookeeper_heap_mb,
            )
            args = [str(home / "zoo.cfg")]
            jaas = self.secure.zookeeper_jaas if self.secure else None
        elif kind == "controller":
            home = self.layout.controller(name).home
            main, heap, args = (
                "kafka.Kafka",
                self.settings.controller_heap_mb,
                [str(home / "server.properties")],
            )
            jaas = None
        elif kind == "kafka":
            home = self.layout.broker(int(number)).home
            main, heap, args = (
                "kafka.Kafka",
                self.settings.kafka_heap_mb,
                [str(home / "server.properties")],
            )
            jaas = self.secure.broker_jaas if self.secure else None
        else:
            raise StackError(f"no process {name!r} in this stack")
        return java_command(
            heap_mb=heap,
            classpath=[self.info().kafka_libs / "*"],
            main_class=main,
            args=args,
            state_dir=self.layout.state_dir,
            log4j_file=home / "log4j.properties",
            logs_dir=self.layout.logs_dir,
            options=self.settings.java_options,
            properties=[f"java.security.auth.login.config={jaas}"] if jaas else [],
        )

    def _registry_command(self) -> list[str]:
        home = self.layout.state_dir / REGISTRY
        home.mkdir(parents=True, exist_ok=True)
        (home / "log4j.properties").write_text("")
        return java_command(
            heap_mb=self.settings.schema_registry_heap_mb,
            classpath=[registry_jar(self.settings.cache_dir, self._announce)],
            main_class=REGISTRY_MAIN,
            args=[],
            state_dir=self.layout.state_dir,
            log4j_file=home / "log4j.properties",
            logs_dir=self.layout.logs_dir,
            options=self.settings.java_options,
            properties=[
                f"quarkus.http.port={self.settings.schema_registry_port}",
                f"quarkus.http.host={self.layout.host}",
            ],
        )

    def _wait_for_registry(self) -> None:
        deadline = self._deadline()
        url = self._registry_url()
        assert url is not None
        while not registry_answers(url):
            self._fail_if_exited([REGISTRY])
            if self._now() > deadline:
                raise self._not_up(REGISTRY, self._timed_out())
            self._sleep(0.3)

    def _start(self, name: str) -> None:
        self._records[name] = spawn(name, self._command(name), self.layout.log_file(name))
        self._save()

    def _deadline(self) -> float:
        return self._now() + self.settings.start_timeout_s

    def _not_up(self, name: str, why: str) -> StackError:
        log = self.layout.log_file(name)
        return StackError(f"{name} did not come up ({why}); last lines of {log}:\n{tail(log)}")

    def _timed_out(self) -> str:
        return f"not ready within {self.settings.start_timeout_s:.0f}s"

    def _fail_if_exited(self, names: list[str]) -> None:
        for name in names:
            if not is_running(self._records[name]):
                raise self._not_up(name, "process exited")

    def _wait_for_zookeeper(self) -> None:
        deadline = self._deadline()
        pending = list(self.layout.zookeepers)
        while pending:
            self._fail_if_exited([z.name for z in pending])
            pending = [
                z
                for z in pending
                if probes.zookeeper_mode(self.layout.host, z.client_port, self._ca()) is None
            ]
            if pending and self._now() > deadline:
                raise self._not_up(pending[0].name, self._timed_out())
            if pending:
                self._sleep(0.2)

    def _wait_for_brokers(self, broker_ids: set[int]) -> None:
        """Until every broker is in `/brokers/ids` (ZooKeeper mode) and every running broker's
        own metadata lists them all."""
        deadline = self._deadline()
        names = [self.layout.broker(b).name for b in broker_ids]
        kafka = self.kafka()

        def listed_by_all() -> bool:
            running = self.running()
            addresses = {
                b.broker_id: f"{self.layout.host}:{b.port}"
                for b in self.layout.brokers
                if running.get(b.name) or b.broker_id in broker_ids
            }
            views = probes.brokers_each_sees(kafka, addresses)
            return all(broker_ids <= seen for seen in views.values())

        if self.settings.kraft_brokers:
            while not listed_by_all():
                self._fail_if_exited(names)
                if self._now() > deadline:
                    raise self._not_up(names[0], self._timed_out())
                self._sleep(0.3)
            return
        with probes.zookeeper_client(self.layout.zookeeper_hosts, self.zookeeper_access()) as zk:
            while True:
                self._fail_if_exited(names)
                registered = probes.registered_brokers(zk, self.layout.chroot)
                if broker_ids <= registered and listed_by_all():
                    return
                if self._now() > deadline:
                    missing = sorted(broker_ids - registered) or sorted(broker_ids)
                    raise self._not_up(self.layout.broker(missing[0]).name, self._timed_out())
                self._sleep(0.3)

    def _wait_for_quorum(self) -> None:
        """Until the controllers have elected a leader (DescribeQuorum answers with one)."""
        if not self.layout.controllers:
            return
        deadline = self._deadline()
        names = [c.name for c in self.layout.controllers]
        while self.quorum_leader() is None:
            self._fail_if_exited(names)
            if self._now() > deadline:
                raise self._not_up(names[0], self._timed_out())
            self._sleep(0.3)

    def quorum_leader(self) -> tuple[int, int] | None:
        """The active controller's node id and its epoch, or None while there is none."""
        servers = [(self.layout.host, c.port) for c in self.layout.controllers]
        client = QuorumClient(servers, timeout_s=1.0)
        try:
            status = client.status()
        except QuorumUnavailable:
            return None
        finally:
            client.close()
        return None if status.leader_id < 0 else (status.leader_id, status.leader_epoch)

    def _ca(self) -> Path | None:
        return self.secure.ca if self.secure else None

    def _create_scram_users(self, secure: SecureMaterial) -> None:
        """The brokers' and zkcdc's SCRAM users, written where Kafka reads them before the first
        broker starts, as the brokers' own ZooKeeper identity with Kafka's ACL for them (only
        that identity reads credentials)."""
        access = self.zookeeper_access()
        own = [make_acl("sasl", BROKER_ZK_USER, all=True)]
        readable = [*own, make_acl("world", "anyone", read=True)]
        with probes.zookeeper_client(self.layout.zookeeper_hosts, access) as zk:
            for path in (self.layout.chroot, f"{self.layout.chroot}/config"):
                if not zk.exists(path):
                    zk.create(path, b"", acl=readable)
            users = f"{self.layout.chroot}/config/users"
            if not zk.exists(users):
                zk.create(users, b"", acl=own)
            for user in (INTER_BROKER_USER, CLIENT_USER):
                zk.create(f"{users}/{user}", scram_user_znode(secure.passwords[user]), acl=own)

    # ---- staging incidents --------------------------------------------------------------
    def stop_broker(self, broker_id: int, sig: int = signal.SIGTERM) -> None:
        """Stop a broker and wait until its process is gone (SIGTERM = controlled shutdown)."""
        record = self._records[self.layout.broker(broker_id).name]
        terminate([record], self.settings.stop_timeout_s, sig)

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker again and wait until it is registered and answering."""
        name = self.layout.broker(broker_id).name
        if is_running(self._records[name]):
            raise StackError(f"broker {broker_id} is already running")
        self._start(name)
        self._wait_for_brokers({broker_id})

    def controller_names(self) -> list[str]:
        return [n for n in self._records if n.startswith("controller-")]

    def stop_controller(self, name: str, sig: int = signal.SIGTERM) -> None:
        """Stop one KRaft controller (`controller-N`) and wait until its process is gone."""
        terminate([self._records[name]], self.settings.stop_timeout_s, sig)

    def start_controller(self, name: str) -> None:
        """Start a stopped controller again and wait until the quorum has a leader."""
        if is_running(self._records[name]):
            raise StackError(f"{name} is already running")
        self._start(name)
        self._wait_for_quorum()

    def zookeeper_names(self) -> list[str]:
        return [n for n in self._records if n.startswith("zookeeper-")]

    def stop_zookeeper(self, name: str, sig: int = signal.SIGTERM) -> None:
        """Stop one ZooKeeper server (`zookeeper-N`) and wait until its process is gone."""
        terminate([self._records[name]], self.settings.stop_timeout_s, sig)

    def start_zookeeper(self, name: str) -> None:
        """Start a stopped ZooKeeper server again and wait until it serves (as leader,
        follower or standalone)."""
        if is_running(self._records[name]):
            raise StackError(f"{name} is already running")
        self._start(name)
        node = self.layout.zookeepers[int(name.partition("-")[2]) - 1]
        deadline = self._deadline()
        while probes.zookeeper_mode("127.0.0.1", node.client_port, self._ca()) is None:
            self._fail_if_exited([name])
            if self._now() > deadline:
                raise self._not_up(name, self._timed_out())
            self._sleep(0.2)

    # ---- status and down ----------------------------------------------------------------
    def cluster_view(self) -> ClusterView:
        if self.settings.kraft_brokers:
            # The active controller's copy of the log is the newest; any controller's will do.
            leader = self.quorum_leader()
            chosen = [c for c in self.layout.controllers if leader and c.node_id == leader[0]]
            directory = (chosen or list(self.layout.controllers))[0].metadata_dir
            return kraft_cluster_view(load_image(directory).image)
        hosts = self.layout.zookeeper_hosts
        with probes.zookeeper_client(hosts, self.zookeeper_access(), timeout_s=5.0) as zk:
            return read_cluster_view(zk, self.layout.chroot)

    def down(self) -> list[str]:
        """Stop exactly the processes this stack started (brokers first); returns their names."""
        brokers = [r for n, r in self._records.items() if n.startswith("kafka-")]
        others = [r for n, r in self._records.items() if not n.startswith("kafka-")]
        stopped = [r.name for r in brokers + others if is_running(r)]
        # Brokers shut down in parallel while ZooKeeper is still there for their controlled shutdown.
        terminate(brokers, self.settings.stop_timeout_s)
        terminate(others, self.settings.stop_timeout_s)
        for pid in find_marked(self.layout.state_dir):
            # A process whose record was lost (up crashed between start and save).
            orphan = ProcessRecord(f"pid-{pid}", pid, created(pid))
            terminate([orphan], self.settings.stop_timeout_s)
            stopped.append(orphan.name)
        self._records = {}
        if self.layout.state_dir.exists():
            self._save()
        return stopped


def running_or_started(settings: StackSettings) -> tuple[LocalStack, StackInfo, bool]:
    """The stack at `settings.state_dir` if all of it is running, else one started now; the
    flag says it was started here (so the caller stops it again)."""
    try:
        stack = LocalStack.open(settings.state_dir)
        status = stack.running()
        if status and all(status.values()):
            return stack, stack.info(), False
    except StackError:
        pass  # no stack recorded there: start one
    stack = LocalStack(settings)
    return stack, stack.up(), True
