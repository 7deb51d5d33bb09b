"""Standalone ZooKeeper servers of a test's own, for reading the files a real server writes:
the 3.8.4 bundled with Kafka's jars, and Debian bookworm's 3.8.0 package (`apt-get download`,
unpacked into the cache: no root install). A small `snapCount` makes the server snapshot and
roll its log over within a test; a small `preAllocSize` makes it grow the file past padding."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from zkcdc.ground import waiting
from zkcdc.ground.child_processes import stop
from zkcdc.ground.maven_jars import ArtifactCache
from zkcdc.stack import StackSettings
from zkcdc.stack.kafka_jars import kafka_jars
from zkcdc.stack.probes import free_port_block, zookeeper_mode
from zkcdc.stack.processes import tail

DEBIAN_PACKAGE = "libzookeeper-java"  # zookeeper.jar + zookeeper-jute.jar, 3.8.0


def kafka_libs() -> list[Path]:
    settings = StackSettings()
    return ArtifactCache(settings.cache_dir).fetch(kafka_jars(settings.kafka_version))


def debian_zookeeper_jars() -> list[Path]:
    """Debian's ZooKeeper 3.8.0 jars, downloaded and unpacked once into the cache."""
    target = StackSettings().cache_dir / "debian-zookeeper"
    jars = [target / "usr/share/java/zookeeper.jar", target / "usr/share/java/zookeeper-jute.jar"]
    if all(j.is_file() for j in jars):
        return jars
    work = target.with_name("debian-zookeeper.download")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    fetched = subprocess.run(
        ["apt-get", "download", DEBIAN_PACKAGE], cwd=work, capture_output=True, text=True
    )
    if fetched.returncode != 0:
        # A machine whose package lists were never read: read them, then try again.
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
        fetched = subprocess.run(
            ["apt-get", "download", DEBIAN_PACKAGE], cwd=work, capture_output=True, text=True
        )
    assert fetched.returncode == 0, f"apt-get download {DEBIAN_PACKAGE} failed: {fetched.stderr}"
    (deb,) = work.glob("*.deb")
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
    shutil.rmtree(work, ignore_errors=True)
    assert all(j.is_file() for j in jars), f"{DEBIAN_PACKAGE} did not hold {jars}"
    return jars


def classpath(kind: str) -> list[Path]:
    libs = kafka_libs()
    if kind == "kafka-3.8.4":
        return libs
    # Debian's server with Kafka's copies of what it needs (slf4j, netty, commons-*, ...).
    others = [j for j in libs if not j.name.startswith("zookeeper-")]
    return [*debian_zookeeper_jars(), *others]


@dataclass
class ZookeeperServer:
    kind: str
    port: int
    data_dir: Path
    log_file: Path
    process: subprocess.Popen[bytes]

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def txnlog_dir(self) -> Path:
        return self.data_dir / "version-2"

    def tail(self) -> str:
        return tail(self.log_file, 40)

    def purge(self, keep: int = 3) -> None:
        """ZooKeeper's own PurgeTxnLog: keeps the newest `keep` snapshots and their logs."""
        done = subprocess.run(
            ["java", "-cp", ":".join(map(str, classpath(self.kind))),
             "org.apache.zookeeper.server.PurgeTxnLog", str(self.data_dir), str(self.data_dir),
             "-n", str(keep)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr


def _start(kind: str, work: Path, port: int, config: str) -> ZookeeperServer:
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    (work / "zoo.cfg").write_text(
        f"tickTime=500\ndataDir={data}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n4lw.commands.whitelist=*\nautopurge.purgeInterval=0\n"
        "extendedTypesEnabled=true\n" + config
    )
    log_file = work / "zookeeper.log"
    (work / "log4j.properties").write_text(
        "log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={log_file}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=%d %p %c{1}: %m%n\n"
    )
    with (work / "stdout.log").open("wb") as out:
        process = subprocess.Popen(
            ["java", "-Xmx256m", *StackSettings().java_options,
             f"-Dlog4j.configuration=file:{work / 'log4j.properties'}",
             "-Dznode.container.checkIntervalMs=100",  # empty containers and expired TTLs go soon
             "-cp", ":".join(map(str, classpath(kind))),
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(work / "zoo.cfg")],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return ZookeeperServer(kind, port, data, log_file, process)


def _wait_serving(servers: list[ZookeeperServer]) -> None:
    for server in servers:
        waiting.wait_until(
            lambda server=server: zookeeper_mode("127.0.0.1", server.port), 60,
            what=f"ZooKeeper {server.kind} to serve", interval_s=0.2,
            abandon=lambda server=server: None if server.process.poll() is None else "it exited",
            detail=lambda server=server: (server.data_dir.parent / "stdout.log").read_text()[-3000:]
            + "\n" + server.tail(),
        )  # fmt: skip


def _stop(servers: list[ZookeeperServer]) -> None:
    for server in servers:
        server.process.terminate()  # all at once: a quorum's members wait for each other
    for server in servers:
        stop(server.process, 20)


@contextmanager
def zookeeper_server(
    kind: str, work: Path, snap_count: int = 200, prealloc_kb: int = 16, port: int | None = None
) -> Iterator[ZookeeperServer]:
    """One standalone server (on `port`, e.g. where another one was, or a free one)."""
    server = _start(
        kind, work, port or free_port_block(1),
        f"snapCount={snap_count}\npreAllocSize={prealloc_kb}\n",
    )  # fmt: skip
    try:
        _wait_serving([server])
        yield server
    finally:
        _stop([server])


@contextmanager
def zookeeper_ensemble(
    kind: str, work: Path, voters: int = 2, observers: int = 1
) -> Iterator[list[ZookeeperServer]]:
    """An ensemble: `voters` participants (a leader and followers) and `observers` observers."""
    size = voters + observers
    clients, peers = free_port_block(size), free_port_block(2 * size)
    members = "".join(
        f"server.{n + 1}=127.0.0.1:{peers + 2 * n}:{peers + 2 * n + 1}"
        + (":observer" if n >= voters else "")
        + "\n"
        for n in range(size)
    )
    servers = []
    try:
        for n in range(size):
            node = work / f"node-{n + 1}"
            (node / "data").mkdir(parents=True)
            (node / "data" / "myid").write_text(f"{n + 1}\n")
            observer = "peerType=observer\n" if n >= voters else ""
            config = f"initLimit=20\nsyncLimit=10\n{members}{observer}"
            servers.append(_start(kind, node, clients + n, config))
        _wait_serving(servers)
        yield servers
    finally:
        _stop(servers)
