"""Every Kafka client of zkcdc is built here, from one connection setting: capture's producer,
admin and standby consumer, the alert job's sinks, `replay`, `state show`, and the options of
Spark's Kafka source and sink (Java client names).

Where it comes from, later ones winning: a properties file (`--kafka-config-file`, librdkafka
property names, e.g. the one `zkcdc stack up --secure` writes), `ZKCDC_KAFKA_*` environment
variables (`ZKCDC_KAFKA_SASL_PASSWORD`...), then `--kafka-config KEY=VALUE` and
`--bootstrap-servers` on the command line. Secrets are refused on the command line (any user
can read a process's argv) and are `SecretStr` everywhere else."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from zkcdc.ground import logs
from zkcdc.ground.backoff import Backoff
from zkcdc.ground.cli_options import invalid_setting
from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.secret_files import check_secret_file

log = logs.get("zkcdc.kafka")

ENV_PREFIX = "ZKCDC_KAFKA_"

# librdkafka properties whose values are secrets: never accepted on a command line.
_SECRET_PROPERTY = re.compile(r"password|secret|jaas|\.key\.pem$|ssl_key\.pem$|\.pem$", re.I)


# librdkafka's prefetch defaults (64 MiB and 100,000 messages queued a partition, 50 MiB a
# fetch) made a daemon's memory grow with the backlog it read, and allocator arenas of the
# client's threads keep what they once held. These bound a consumer to a few MiB a partition.
# A consumer's close waits for its group's coordinator, and librdkafka asks for one again and
# again while none answers (confluentinc/librdkafka#3740): a close just after every broker came
# back took over 25 s. zkcdc's consumers are assigned their partitions and commit nothing, so
# nothing is lost by not waiting that out: the close goes on in the background.
CLOSE_WAIT_S = 5.0
PREFETCH_KBYTES_PER_PARTITION = 2048
CONSUMER_PREFETCH: dict[str, Any] = {
    "queued.max.messages.kbytes": PREFETCH_KBYTES_PER_PARTITION,
    "queued.min.messages": 1000,
    "fetch.max.bytes": 4 * 2**20,
}


class KafkaConnectionError(ZkcdcError):
    """A connection setting that cannot be used, or a Kafka that cannot be reached."""


class NoSuchTopic(KafkaConnectionError):
    pass


class KafkaUnreachable(KafkaConnectionError):
    """No answer in time, or an answer saying "later": another try may succeed."""


def is_secret_property(name: str) -> bool:
    return bool(_SECRET_PROPERTY.search(name)) and not name.endswith(("ca.pem", "certificate.pem"))


class KafkaConnection(BaseModel):
    """Where Kafka is and how to prove who we are to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"] | None
    ) = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: Path | None = None  # PEM
    ssl_certificate_location: Path | None = None  # PEM: the client's own (mutual TLS)
    ssl_key_location: Path | None = None  # PEM (PKCS#8 for Spark's Java client)
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification_algorithm: Literal["https", "none"] = "https"
    # Anything else: librdkafka properties as given; `java.<name>` goes to Spark's Java client
    # only (GSSAPI's sasl.jaas.config, a JKS truststore...).
    other: dict[str, SecretStr] = {}

    # -- building -------------------------------------------------------------------------
    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> KafkaConnection:
        typed = {name.replace(".", "_"): name for name in _TYPED}
        values: dict[str, Any] = {"other": {}}
        for name, value in properties.items():
            field = name.replace(".", "_")
            if field in typed:
                values[field] = value
            else:
                values["other"][name] = value
        if "bootstrap_servers" not in values:
            raise KafkaConnectionError("no Kafka given: --bootstrap-servers (or bootstrap.servers)")
        try:
            return cls(**values)
        except ValidationError as exc:
            raise KafkaConnectionError(f"Kafka connection: {invalid_setting(exc)}") from exc

    def librdkafka(self) -> dict[str, Any]:
        """The properties of a confluent-kafka client (secrets revealed here only)."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        for field, name in _TYPED.items():
            value = getattr(self, field.replace(".", "_"))
            if value is None or field == "bootstrap.servers":
                continue
            config[name] = _reveal(value)
        for name, secret in self.other.items():
            if not name.startswith("java."):
                config[name] = secret.get_secret_value()
        return config

    def java(self) -> dict[str, str]:
        """The same connection for Kafka's Java client (Spark's `kafka.*` options)."""
        config: dict[str, str] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_username is not None and self.sasl_password is not None:
                login = jaas_login(
                    self.sasl_mechanism, self.sasl_username, self.sasl_password.get_secret_value()
                )
                if login is not None:
                    config["sasl.jaas.config"] = login
        if self.ssl_ca_location is not None:
            config["ssl.truststore.type"] = "PEM"
            config["ssl.truststore.location"] = str(self.ssl_ca_location)
        if self.ssl_certificate_location is not None and self.ssl_key_location is not None:
            config["ssl.keystore.type"] = "PEM"
            config["ssl.keystore.certificate.chain"] = _read(self.ssl_certificate_location)
            config["ssl.keystore.key"] = _read(self.ssl_key_location)
            if self.ssl_key_password is not None:
                config["ssl.key.password"] = self.ssl_key_password.get_secret_value()
        if self.ssl_endpoint_identification_algorithm == "none":
            config["ssl.endpoint.identification.algorithm"] = ""
        for name, secret in self.other.items():
            if name.startswith("java."):
                config[name.removeprefix("java.")] = secret.get_secret_value()
            elif name in _SHARED:
                config[name] = secret.get_secret_value()
        return config

    def describe(self) -> str:
        """For messages: where, and how (never a secret)."""
        how: str = self.security_protocol
        if self.sasl_mechanism:
            who = f" as {self.sasl_username}" if self.sasl_username else ""
            how += f", {self.sasl_mechanism}{who}"
        return f"{self.bootstrap_servers} ({how})" if how != "PLAINTEXT" else self.bootstrap_servers

    # -- clients ---------------------------------------------------------------------------
    def producer(self, config: Mapping[str, Any] | None = None, quiet: bool = False) -> Any:
        """A producer with `config` over the connection's properties."""
        from confluent_kafka import Producer

        return Producer({**self.librdkafka(), "logger": _logger(quiet), **(config or {})})

    def consumer(
        self, group: str, config: Mapping[str, Any] | None = None, quiet: bool = False
    ) -> Any:
        """A consumer whose prefetch is bounded (`CONSUMER_PREFETCH`, under the connection's
        own properties): each reads a topic to its end or follows its tail."""
        from confluent_kafka import Consumer

        settings = {
            "group.id": group,
            "enable.auto.commit": False,
            "logger": _logger(quiet),
            # Committed records only: capture publishes in transactions, and a fenced
            # daemon's aborted records must stay unseen (librdkafka's default; said here).
            "isolation.level": "read_committed",
        }
        return Consumer({**CONSUMER_PREFETCH, **self.librdkafka(), **settings, **(config or {})})

    def admin(self) -> Any:
        """A short-lived admin client whose failure is reported as one error of its own:
        librdkafka's complaints (hundreds while a cluster is down) are dropped."""
        from confluent_kafka.admin import AdminClient

        # Its metadata requests never make a broker auto-create the topic they ask about.
        return AdminClient(
            {**self.librdkafka(), "allow.auto.create.topics": False}, logger=_logger(True)
        )

    def list_topics(self, timeout: float, admin: Any = None) -> Any:
        """The cluster's metadata, or KafkaConnectionError saying why not."""
        from confluent_kafka import KafkaException

        try:
            return (admin or self.admin()).list_topics(timeout=timeout)
        except KafkaException as exc:
            raise KafkaUnreachable(
                f"Kafka at {self.describe()} is unreachable: {exc.args[0].str()}"
            ) from exc

    def brokers_answering(self, timeout: float) -> int:
        return len(self.list_topics(timeout).brokers)

    def ensure_topic(
        self, topic: str, partitions: int, timeout: float, config: Mapping[str, str] | None = None
    ) -> None:
        """Creates the topic if missing (replication min(3, brokers)); an existing one is
        left as it is."""
        from zkcdc.ground.topic_creation import TopicCreationError
        from zkcdc.ground.topic_creation import ensure_topic as ensure

        try:
            ensure(
                self.admin, lambda: self.list_topics(timeout), topic, partitions, timeout, config
            )
        except TopicCreationError as exc:
            raise (KafkaUnreachable if exc.transient else KafkaConnectionError)(str(exc)) from exc

    def watermarks(self, topic: str, timeout_s: float) -> dict[int, tuple[int, int]]:
        """Each partition of `topic`: its (low, high) watermarks, waiting out a leader that
        moves. NoSuchTopic when it does not exist; KafkaException when Kafka does not
        answer."""
        from confluent_kafka import TopicPartition

        consumer = self.consumer(f"zkcdc-watermarks-{os.getpid()}", quiet=True)
        try:
            return {
                p: _watermarks(consumer, TopicPartition(topic, p), timeout_s)
                for p in self._partitions(consumer, topic, timeout_s)
            }
        finally:
            close_consumer(consumer)

    def _partitions(self, consumer: Any, topic: str, timeout_s: float) -> list[int]:
        """The partitions of `topic` as `consumer` is told of them; NoSuchTopic when it has
        none."""
        found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise NoSuchTopic(f"no topic {topic} on {self.describe()}")
        return sorted(found.partitions)

    def read_to_end(
        self,
        topic: str,
        take: Callable[[Any], None],
        since_ms: int | None = None,
        timeout_s: float = 30.0,
        group: str = "zkcdc-read",
    ) -> None:
        """Every message of `topic` from `since_ms` on (by timestamp; None: from the start) up
        to the end the topic had when the read began, handed to `take` in offset order per
        partition. NoSuchTopic when it does not exist.

        A partition is read once a message at its end offset came, or the consumer said it
        reached the end (EOF) at or past it: the last offsets of a transactional topic are
        commit markers, never handed out, and a compacted one may have no message there."""
        from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

        consumer = self.consumer(group, {"enable.partition.eof": True}, quiet=True)
        try:
            partitions = self._partitions(consumer, topic, timeout_s)
            if since_ms is None:
                starts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
            else:
                wanted = [TopicPartition(topic, p, since_ms) for p in partitions]
                starts = consumer.offsets_for_times(wanted, timeout=timeout_s)
            ends = {}
            for tp in starts:
                low, high = _watermarks(consumer, tp, timeout_s)
                first = low if tp.offset == OFFSET_BEGINNING else tp.offset
                if 0 <= first < high:
                    ends[tp.partition] = high
            consumer.assign([tp for tp in starts if tp.partition in ends])
            stalled_at = time.monotonic() + timeout_s
            while ends:
                # consume() waits its whole timeout for a full batch: short waits, so a small
                # topic is read in a moment, and the stall deadline counted apart.
                messages = consumer.consume(5000, min(0.2, timeout_s))
                if not messages:
                    if time.monotonic() > stalled_at:
                        raise KafkaConnectionError(
                            f"reading {topic} stalled: no message in {timeout_s:g} s"
                        )
                    continue
                stalled_at = time.monotonic() + timeout_s
                for message in messages:
                    partition, offset = message.partition() or 0, message.offset() or 0
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF and offset >= ends.get(
                            partition, 0
                        ):
                            ends.pop(partition, None)
                        continue
                    take(message)
                    if offset + 1 >= ends.get(partition, 0):
                        ends.pop(partition, None)
        except KafkaException as exc:
            raise KafkaConnectionError(
                f"cannot read {topic} from {self.describe()}: {exc.args[0].str()}"
            ) from exc
        finally:
            close_consumer(consumer)


_TYPED = {
    "bootstrap.servers": "bootstrap.servers",
    "security.protocol": "security.protocol",
    "sasl.mechanism": "sasl.mechanism",
    "sasl.username": "sasl.username",
    "sasl.password": "sasl.password",
    "ssl.ca.location": "ssl.ca.location",
    "ssl.certificate.location": "ssl.certificate.location",
    "ssl.key.location": "ssl.key.location",
    "ssl.key.password": "ssl.key.password",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}
_SHARED = {"sasl.kerberos.service.name", "client.id"}  # the same name in both clients
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _reveal(value: Any) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return str(value)


def jaas_quote(text: str) -> str:
    """`text` inside the double quotes of a JAAS option."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def jaas_login(mechanism: str, username: str, password: str) -> str | None:
    """Kafka's `sasl.jaas.config` line for a user/password mechanism (None for the others)."""
    module = _LOGIN_MODULES.get(mechanism)
    if module is None:
        return None
    user, secret = jaas_quote(username), jaas_quote(password)
    return f'{module} required username="{user}" password="{secret}";'


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise KafkaConnectionError(f"cannot read {path}: {exc.strerror}") from exc


def _logger(quiet: bool) -> logging.Logger:
    return (
        logs.quiet(logs.LIBRDKAFKA_LOGGER + ".probe")
        if quiet
        else logging.getLogger(logs.LIBRDKAFKA_LOGGER)
    )


# -- where the settings come from ---------------------------------------------------------
def read_properties(path: Path) -> dict[str, str]:
    """A Java-style properties file: `name=value` lines, `#`/`!` comments."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise KafkaConnectionError(f"cannot read Kafka config file {path}: {exc.strerror}") from exc
    properties = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise KafkaConnectionError(f"{path} line {number}: expected name=value")
        properties[name.strip()] = value.strip()
    return properties


def from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`ZKCDC_KAFKA_SASL_PASSWORD=...` -> {"sasl.password": ...}, for the typed names."""
    found = {}
    for name in _TYPED:
        value = environ.get(ENV_PREFIX + name.replace(".", "_").upper())
        if value is not None:
            found[name] = value
    return found


def refuse_secrets_on_argv(pairs: Mapping[str, str]) -> None:
    for name in pairs:
        if is_secret_property(name):
            env = ENV_PREFIX + name.replace(".", "_").upper()
            raise KafkaConnectionError(
                f"{name} is a secret: give it in --kafka-config-file or ${env}, not on the "
                "command line (any user can read a process's arguments)"
            )


def load(
    bootstrap_servers: str | None,
    config_file: Path | None = None,
    pairs: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> KafkaConnection | None:
    """The connection the command was given, None when it was given no Kafka at all."""
    environ = os.environ if environ is None else environ
    config_file = config_file or _path(environ.get(ENV_PREFIX + "CONFIG_FILE"))
    properties = read_properties(config_file) if config_file is not None else {}
    if config_file is not None:
        check_secret_file(config_file, filter(is_secret_property, properties))
    properties |= from_environment(environ)
    properties |= dict(pairs or {})
    if bootstrap_servers:
        properties["bootstrap.servers"] = bootstrap_servers
    if "bootstrap.servers" not in properties and config_file is None and not pairs:
        return None  # no Kafka asked for (ZKCDC_KAFKA_* alone are defaults for when it is)
    return KafkaConnection.from_properties(properties)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


# A partition whose leader is not elected yet (a topic just made) or moving answers these;
# they pass, so a read waits them out within its timeout instead of failing on them.
_LEADER_MOVING = ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "_WAIT_COORD")


def _watermarks(consumer: Any, tp: Any, timeout_s: float) -> tuple[int, int]:
    from confluent_kafka import KafkaError, KafkaException

    deadline = time.monotonic() + timeout_s
    backoff = Backoff(first_s=0.2, most_s=1.0)
    # not a wait: a retry while a partition's leader moves (a few hundred ms)
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
            return int(low), int(high)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            moving = error.retriable() or error.name() in _LEADER_MOVING
            if not moving or time.monotonic() > deadline:
                raise
            time.sleep(backoff.failed())


def close_consumer(consumer: Any, within_s: float = CLOSE_WAIT_S) -> bool:
    """Closes a consumer of zkcdc's (assigned, committing nothing), waiting at most `within_s`
    for it (CLOSE_WAIT_S); True when it closed."""
    closing = threading.Thread(target=consumer.close, name="consumer-close", daemon=True)
    closing.start()
    closing.join(within_s)
    if closing.is_alive():
        log.warning("a Kafka consumer's close is still waiting for its group coordinator; left "
                    "to finish in the background", waited_s=within_s)  # fmt: skip
        return False
    return True
