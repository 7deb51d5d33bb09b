"""Settings of the local stack: flags override `ZKCDC_STACK_*` env vars override defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from zkcdc.ground.user_dirs import default_cache_dir, state_home

KAFKA_VERSION = "3.9.2"
# A Kafka 4.x (KRaft only) for the metadata log format tests: the newest whose jars are all in
# the Maven repository reachable here (4.2.2 and 4.4.0 lack kafka-tools).
KAFKA_4_VERSION = "4.3.1"


def default_state_dir() -> Path:
    return state_home() / "stack"


class StackSettings(BaseSettings):
    """Everything `zkcdc stack up` needs to lay out and start a cluster."""

    model_config = SettingsConfigDict(env_prefix="ZKCDC_STACK_", frozen=True)

    state_dir: Path = Field(default_factory=default_state_dir)
    # zookeeper: ZooKeeper + brokers in ZooKeeper mode; kraft: a KRaft controller quorum + brokers.
    mode: Literal["zookeeper", "kraft"] = "zookeeper"
    # A ZooKeeper-mode stack migrated to KRaft (`zkcdc stack migrate`), the last phase done:
    # controllers (started with migration enabled), dual-write (brokers rolled with it; the
    # metadata migrated), kraft-brokers (brokers rolled to KRaft), finalized (controllers
    # rolled without ZooKeeper).
    migration: Literal["", "controllers", "dual-write", "kraft-brokers", "finalized"] = ""
    cache_dir: Path = Field(default_factory=default_cache_dir)  # Maven's jars, fetched once
    kafka_version: str = KAFKA_VERSION
    zookeeper_nodes: int = Field(default=1, ge=1, le=7)
    brokers: int = Field(default=3, ge=1, le=9)
    host: str = "127.0.0.1"  # the address every process listens on
    zookeeper_port: int = Field(default=2181, ge=1024, le=65000)
    kafka_port: int = Field(default=9092, ge=1024, le=65000)
    chroot: str = "/kafka"
    zookeeper_heap_mb: int = Field(default=256, ge=64)  # each ZooKeeper node's JVM heap
    # --mode kraft: the controller quorum (node ids 101, 102, ...; ports from controller_port).
    controllers: int = Field(default=3, ge=1, le=5)
    controller_port: int = Field(default=9192, ge=1024, le=65000)
    controller_heap_mb: int = Field(default=256, ge=128)  # each KRaft controller's JVM heap
    kafka_heap_mb: int = Field(default=384, ge=128)  # each broker's JVM heap
    # Extra JVM options for every Java process of the stack, after zkcdc's own, e.g.
    # `ZKCDC_STACK_JAVA_OPTIONS='["-XX:TieredStopAtLevel=1"]'` (quicker start-ups on a small
    # machine: the test suite's setting).
    java_options: tuple[str, ...] = ()
    # Short timeouts so that a dead or lagging broker shows within seconds.
    zookeeper_tick_ms: int = 500
    session_timeout_ms: int = 6000  # brokers' ZooKeeper session
    replica_lag_ms: int = 4000  # replica.lag.time.max.ms: a follower this far behind leaves the ISR
    start_timeout_s: float = 120.0
    stop_timeout_s: float = 60.0  # how long `down` waits for a process before SIGKILL
    broker_config: dict[str, str] = Field(default_factory=dict)
    # Extra log4j levels for every Kafka and ZooKeeper process, e.g. a logger at DEBUG to see
    # when something happened (`{"org.apache.kafka.raft.LeaderState": "DEBUG"}`).
    log_levels: dict[str, str] = Field(default_factory=dict)
    # SASL_SSL brokers (SCRAM-SHA-512), ZooKeeper on TLS with SASL and Kafka's ACLs on it.
    secure: bool = False
    # A schema registry (Apicurio, Confluent's API) beside the cluster, for --schema-registry.
    schema_registry: bool = False
    schema_registry_port: int = Field(default=8081, ge=1024, le=65000)
    schema_registry_heap_mb: int = Field(default=256, ge=128)  # the registry's JVM heap

    @property
    def has_controllers(self) -> bool:
        """Whether the stack runs KRaft controllers: a KRaft stack, or one being migrated."""
        return self.mode == "kraft" or self.migration != ""

    @property
    def kraft_brokers(self) -> bool:
        """Whether the brokers run in KRaft mode (no ZooKeeper of their own)."""
        return self.mode == "kraft" or self.migration in ("kraft-brokers", "finalized")

    @field_validator("chroot")
    @classmethod
    def _chroot_is_absolute(cls, value: str) -> str:
        if not value.startswith("/") or value.endswith("/") or "//" in value:
            raise ValueError("chroot must look like /name (absolute, no trailing slash)")
        return value
