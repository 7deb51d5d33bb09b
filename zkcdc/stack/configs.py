"""Config files of the stack's processes, rendered as text: pure functions of layout and settings."""

from __future__ import annotations

from collections.abc import Mapping

from zkcdc.stack.layout import KafkaBroker, KraftController, StackLayout, ZookeeperNode
from zkcdc.stack.secure import SecureMaterial
from zkcdc.stack.settings import StackSettings


def _properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


def zookeeper_config(
    layout: StackLayout,
    node: ZookeeperNode,
    settings: StackSettings,
    secure: SecureMaterial | None = None,
) -> str:
    values = {
        "tickTime": str(settings.zookeeper_tick_ms),
        "initLimit": "20",
        "syncLimit": "10",
        "dataDir": str(node.data_dir),
        "clientPort": str(node.client_port),
        "clientPortAddress": layout.host,
        "maxClientCnxns": "0",
        # Jetty's admin server would bind 8080; four-letter words are our readiness probe.
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
        "minSessionTimeout": str(2 * settings.zookeeper_tick_ms),
        "maxSessionTimeout": str(max(60_000, 20 * settings.zookeeper_tick_ms)),
    }
    if len(layout.zookeepers) > 1:
        for z in layout.zookeepers:
            values[f"server.{z.node_id}"] = f"{layout.host}:{z.quorum_port}:{z.election_port}"
    if secure is not None:
        # The client port speaks TLS only, and a session must authenticate with SASL.
        port = values.pop("clientPort")
        values.update({
            "secureClientPort": port,
            "secureClientPortAddress": values.pop("clientPortAddress"),
            "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
            "ssl.keyStore.location": str(secure.server_bundle),
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(secure.ca),
            "ssl.trustStore.type": "PEM",
            "ssl.clientAuth": "none",  # clients prove who they are with SASL
            "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "enforce.auth.enabled": "true",
            "enforce.auth.schemes": "sasl",
        })  # fmt: skip
    return _properties(values)


def broker_config(
    layout: StackLayout,
    broker: KafkaBroker,
    settings: StackSettings,
    secure: SecureMaterial | None = None,
) -> str:
    n = len(layout.brokers)
    protocol = "SASL_SSL" if secure is not None else "PLAINTEXT"
    listener = f"{protocol}://{layout.host}:{broker.port}"
    node = "node.id" if settings.kraft_brokers else "broker.id"
    values = {
        node: str(broker.broker_id),
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": str(broker.log_dir),
        **_coordination(layout, settings, "broker"),
        "replica.lag.time.max.ms": str(settings.replica_lag_ms),
        "controlled.shutdown.enable": "true",
        "delete.topic.enable": "true",
        "num.partitions": "1",
        "offsets.topic.replication.factor": str(min(3, n)),
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": str(min(3, n)),
        "transaction.state.log.min.isr": str(min(2, n)),
        "transaction.state.log.num.partitions": "5",
        "group.initial.rebalance.delay.ms": "0",
        # Two cores and small heaps: few threads, a small log-cleaner buffer (default 128 MB).
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": "8388608",
    }
    if secure is not None:
        values.update({
            "security.inter.broker.protocol": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": secure.broker_jaas_line(),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(secure.server_bundle),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(secure.ca),
            "ssl.endpoint.identification.algorithm": "https",
            # To ZooKeeper: TLS, SASL (the JAAS file's Client section), znodes ACL'd.
            "zookeeper.ssl.client.enable": "true",
            "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
            "zookeeper.ssl.truststore.location": str(secure.ca),
            "zookeeper.ssl.truststore.type": "PEM",
            "zookeeper.set.acl": "true",
        })  # fmt: skip
    values.update(settings.broker_config)
    return _properties(values)


def _coordination(layout: StackLayout, settings: StackSettings, role: str) -> dict[str, str]:
    """How a node finds its cluster: ZooKeeper, or the KRaft controller quorum, or (while
    migrating, Kafka's documented steps) both."""
    zookeeper = {
        "zookeeper.connect": layout.zookeeper_connect,
        "zookeeper.session.timeout.ms": str(settings.session_timeout_ms),
        "zookeeper.connection.timeout.ms": "30000",
    }
    migrating = settings.migration in ("controllers", "dual-write", "kraft-brokers")
    if role == "broker" and not settings.kraft_brokers:
        if settings.migration != "dual-write":
            return zookeeper
        return {  # a ZooKeeper-mode broker that registers with the KRaft controllers too
            **zookeeper,
            "zookeeper.metadata.migration.enable": "true",
            "controller.quorum.voters": layout.quorum_voters,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.protocol.version": ".".join(settings.kafka_version.split(".")[:2]),
        }
    kraft = {
        "process.roles": role,
        "controller.quorum.voters": layout.quorum_voters,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        # Brokers fenced within seconds of going quiet, as ZooKeeper sessions expire.
        "broker.session.timeout.ms": str(settings.session_timeout_ms),
        "broker.heartbeat.interval.ms": str(max(500, settings.session_timeout_ms // 6)),
    }
    if role == "controller" and migrating:
        kraft.update({
            **zookeeper,
            "zookeeper.metadata.migration.enable": "true",
            "inter.broker.listener.name": "PLAINTEXT",  # its requests to ZooKeeper-mode brokers
        })  # fmt: skip
    return kraft


def controller_config(
    layout: StackLayout, controller: KraftController, settings: StackSettings
) -> str:
    """A KRaft controller (`process.roles=controller`) of the stack's quorum."""
    listener = f"CONTROLLER://{layout.host}:{controller.port}"
    values = {
        **_coordination(layout, settings, "controller"),
        "node.id": str(controller.node_id),
        "listeners": listener,
        "log.dirs": str(controller.log_dir),
        "num.io.threads": "2",
        "num.network.threads": "2",
        "background.threads": "2",
    }
    return _properties(values)


def log4j_config(levels: Mapping[str, str] | None = None) -> str:
    """One console appender (the process's stdout goes to its log file), Kafka's usual levels,
    then the stack's own `log_levels`."""
    extra = {f"log4j.logger.{name}": level for name, level in (levels or {}).items()}
    return _properties(
        {
            "log4j.rootLogger": "INFO, stdout",
            "log4j.appender.stdout": "org.apache.log4j.ConsoleAppender",
            "log4j.appender.stdout.layout": "org.apache.log4j.PatternLayout",
            "log4j.appender.stdout.layout.ConversionPattern": "[%d] %p %m (%c)%n",
            "log4j.logger.kafka.request.logger": "WARN",
            "log4j.logger.kafka.network.RequestChannel$": "WARN",
            "log4j.logger.kafka.log.LogCleaner": "WARN",
            "log4j.logger.org.apache.kafka.storage.internals.log": "WARN",
            "log4j.logger.kafka.log": "WARN",
            "log4j.logger.org.apache.zookeeper": "INFO",
            "log4j.logger.state.change.logger": "INFO",
            **extra,
        }
    )
