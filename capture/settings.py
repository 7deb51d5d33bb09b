"""Settings of one capture daemon: flags > `ZKCDC_*` env vars > config file (TOML) > defaults."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    SettingsConfigDict,
)

from zkcdc.capture.errors import CaptureError
from zkcdc.capture.oversize import DEFAULT_MAX_RECORD_BYTES
from zkcdc.capture.secret_redaction import DEFAULT_REDACTOR, Redact, Redactor, keep_all
from zkcdc.ground import command_settings, kafka_connection, zookeeper_connection
from zkcdc.ground.kafka_connection import KafkaConnection
from zkcdc.ground.private_files import safe_name
from zkcdc.ground.zookeeper_connection import ZooKeeperAccess


def default_state_root() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "zkcdc" / "capture"


class CaptureSettings(command_settings.CommandSettings):
    model_config = SettingsConfigDict(env_prefix="ZKCDC_", frozen=True, extra="forbid")
    toml_table = "capture"
    _kafka: KafkaConnection | None = PrivateAttr(default=None)
    _zookeeper: ZooKeeperAccess = PrivateAttr(default_factory=ZooKeeperAccess)

    config_file: Path | None = None  # TOML: `[capture]` (or the top level), under env and flags
    zookeeper: str | None = Field(
        default=None, description="HOST:PORT[,..][/chroot] of Kafka's ZooKeeper tree"
    )
    # watch: a ZooKeeper client's watches; txnlog: a ZooKeeper server's own data dir (its
    # snapshot, then its transaction logs), every version with its exact zxid.
    # kraft: a KRaft node's copy of the metadata log, up to the quorum's high watermark.
    source: Literal["watch", "txnlog", "kraft"] = "watch"
    zk_data_dir: Path | None = None
    metadata_log_dir: Path | None = None  # kraft: `__cluster_metadata-0` of a controller or broker
    # kraft: where the quorum's high watermark is asked (DescribeQuorum) [default: the brokers]
    bootstrap_controllers: str | None = None
    # kraft: go on from the stream on the topic (a ZooKeeper capture's, on another host) when
    # it is further on than this host's own state: the hand-over of a migrated cluster.
    take_over: bool = False
    chroot: str | None = None  # txnlog: Kafka's chroot [default: that of `zookeeper`, or none]
    # txnlog: how often the log is read while records await Kafka's acks, or where the log
    # folder cannot be watched with inotify (otherwise a write wakes the capture).
    poll_interval_s: float = Field(default=0.002, gt=0, le=1)
    bootstrap_servers: str | None = None
    topic: str = "zkcdc.changes"
    topic_partitions: int = Field(default=6, ge=1)  # of a changes topic capture creates
    # Publish into a changes topic whose partition count is not the one the last run keyed
    # its records for (one path's records then span two partitions): the operator's say-so.
    accept_partition_count: bool = False
    # Records in Kafka transactions: a new active fences the last one, so a frozen
    # daemon's records in flight never reach a read_committed consumer. Off: idempotent only,
    # for a Kafka that refuses transactions (no TransactionalId rights, brokers before 0.11).
    transactions: bool = True
    transactional_id: str | None = None  # [default: zkcdc-capture.<topic>.<cluster>]
    # A transaction commits once its first record has waited this long, or once it holds
    # `commit_records`, whichever comes first. 0 (delivery/transactions.py says why): as soon
    # as a turn has handed records over and no commit is under way; longer, fewer commits.
    commit_interval_ms: int = Field(default=0, ge=0, le=60_000)
    commit_records: int = Field(default=10_000, ge=1, le=100_000)
    event_log: Path | None = None
    state_dir: Path = Field(default_factory=default_state_root)
    cluster: str | None = None
    heartbeat_s: float = Field(default=1.0, gt=0)
    schema_registry: str | None = None
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"  # loopback unless told otherwise
    metrics_web_config: Path | None = None  # TLS and basic auth (Prometheus's web-config)
    wait: bool = False
    ha_path: str = "/zkcdc/capture"
    session_timeout_s: float = Field(default=10.0, ge=2)
    # How long the first connection to ZooKeeper or Kafka may take before capture gives up.
    connect_timeout_s: float = Field(default=15.0, gt=0)
    zookeeper_auth: SecretStr | None = Field(default=None, description="digest user:password")
    # TLS and SASL to ZooKeeper (zkcdc/zookeeper_connection.py); secrets belong there too.
    zookeeper_config_file: Path | None = None
    # Secrets of Kafka's tree (SCRAM credentials, password configs) are recorded as keyed
    # digests; `keep_secrets` records them as they are (forensics, with the files guarded).
    keep_secrets: bool = False
    redaction_key: SecretStr | None = None  # the same on every daemon of a cluster
    kafka_config: dict[str, SecretStr] = Field(default_factory=dict)
    kafka_config_file: Path | None = None  # librdkafka properties; secrets belong here
    log_rotate_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)  # an event-log file's size
    log_rotate_s: float = Field(default=3600.0, gt=0)  # ... or age, before the next file
    checkpoint_s: float = Field(default=30.0, gt=0)  # how often the saved tree is written
    # Each event-log block is fsynced before its records go to Kafka or into a checkpoint: off
    # only where losing the log's last second in a power cut is acceptable.
    event_log_fsync: bool = True
    # The largest record that goes to Kafka whole: the topic is created with room for it (two
    # images of a 1 MiB znode, ZooKeeper's default jute.maxbuffer, and their events).
    max_record_bytes: int = Field(default=DEFAULT_MAX_RECORD_BYTES, ge=64 * 1024)
    # recursive: one persistent recursive watch (ZooKeeper 3.6+, falls back to one-shot on older
    # servers); one-shot: a data and a child watch per znode, re-armed by each read.
    watch_mode: Literal["recursive", "one-shot"] = "recursive"

    @field_validator("zookeeper")
    @classmethod
    def _connect_string(cls, value: str | None) -> str | None:
        if value is None:
            return value
        hosts, _, _ = value.partition("/")
        if not re.fullmatch(r"[^,:/\s]+:\d+(,[^,:/\s]+:\d+)*", hosts):
            raise ValueError("must look like HOST:PORT[,HOST:PORT...][/chroot]")
        return value

    @field_validator("ha_path", "chroot")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return value
        if not value.startswith("/") or value.endswith("/"):
            raise ValueError("must look like /a/b")
        return value

    @model_validator(mode="after")
    def _source_needs(self) -> CaptureSettings:
        if self.source == "watch" and self.zookeeper is None:
            raise ValueError("zookeeper: required with --source watch (HOST:PORT[/chroot])")
        if self.source == "txnlog" and self.zk_data_dir is None:
            raise ValueError("zk_data_dir: required with --source txnlog (ZooKeeper's dataDir)")
        if self.source == "kraft":
            if self.metadata_log_dir is None:
                raise ValueError(
                    "metadata_log_dir: required with --source kraft (a __cluster_metadata-0 dir)"
                )
            if self.take_over and not self.bootstrap_servers:
                raise ValueError(
                    "take_over: --take-over reads the stream from Kafka: give --bootstrap-servers"
                )
            if not (self.bootstrap_controllers or self.bootstrap_servers):
                raise ValueError(
                    "bootstrap_controllers: --source kraft asks the quorum what is committed: "
                    "give --bootstrap-controllers or --bootstrap-servers"
                )
        return self

    def excluded_paths(self, chroot: str) -> Callable[[str], bool]:
        """With Kafka at the ZooKeeper root, zkcdc's own election znodes are not Kafka's tree."""
        if chroot:
            return lambda path: False
        ha_path = self.ha_path
        return lambda path: path == ha_path or path.startswith(ha_path + "/")

    def connect_tries(self) -> int | None:
        """Attempts at ZooKeeper and Kafka at start-up: until they answer with `--wait`."""
        return None if self.wait else 1

    def kafka_chroot(self) -> str:
        """txnlog: the chroot of Kafka's tree in ZooKeeper's absolute paths ("" for none)."""
        if self.chroot is not None:
            return self.chroot
        if self.zookeeper is None:
            return ""
        from zkcdc.ground.zookeeper_connection import split_hosts

        return split_hosts(self.zookeeper)[1]

    def connect_string(self) -> str:
        if self.zookeeper is None:
            raise CaptureError("no ZooKeeper connect string given (--zookeeper)")
        return self.zookeeper

    def model_post_init(self, context: Any) -> None:
        pairs = {k: v.get_secret_value() for k, v in self.kafka_config.items()}
        try:
            self._kafka = kafka_connection.load(
                self.bootstrap_servers, self.kafka_config_file, pairs
            )
            self._zookeeper = zookeeper_connection.load(
                self.zookeeper_config_file, self.zookeeper_auth
            )
        except (
            kafka_connection.KafkaConnectionError,
            zookeeper_connection.ZooKeeperConnectionError,
        ) as exc:
            raise CaptureError(str(exc)) from exc

    def zookeeper_access(self) -> ZooKeeperAccess:
        return self._zookeeper

    def kafka(self) -> KafkaConnection | None:
        """Where records are published, and how to connect (None: the event log only)."""
        return self._kafka

    def redact(self) -> Redact:
        """How znode data is cleaned of secrets before anything records it."""
        if self.keep_secrets:
            return keep_all
        if self.redaction_key is None:
            return DEFAULT_REDACTOR.data
        return Redactor(self.redaction_key.get_secret_value().encode()).data

    def transactional_id_for(self, cluster: str) -> str | None:
        """The stream's transactional.id: every daemon of one cluster's stream shares it, so
        each new one fences the last (None without transactions)."""
        if not self.transactions:
            return None
        return self.transactional_id or f"zkcdc-capture.{self.topic}.{cluster}"

    def state_path(self, cluster: str) -> Path:
        return self.state_dir / safe_name(cluster)

    def event_log_path(self, cluster: str) -> Path:
        return self.event_log or self.state_path(cluster) / "events"


def load_settings(config_file: Path | None, **flags: Any) -> CaptureSettings:
    given = {k: v for k, v in flags.items() if v is not None and v != {}}
    if config_file is not None:
        given["config_file"] = config_file
    try:
        return command_settings.load(CaptureSettings, given)
    except command_settings.SettingsError as exc:
        raise CaptureError(str(exc)) from exc
