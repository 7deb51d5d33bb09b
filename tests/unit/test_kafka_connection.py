"""One Kafka connection setting for every client: from a properties file, ZKCDC_KAFKA_*
variables and the command line (secrets refused there), mapped to librdkafka and to Spark's
Java client, never showing a secret."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from zkcdc.ground.kafka_connection import (
    KafkaConnection,
    KafkaConnectionError,
    close_consumer,
    is_secret_property,
    load,
    refuse_secrets_on_argv,
)

SECURE = """
# written by `zkcdc stack up --secure`
bootstrap.servers=127.0.0.1:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.username=zkcdc
sasl.password=pa"ss\\word
ssl.ca.location=/etc/zkcdc/ca.pem
"""


def test_a_properties_file_gives_librdkafka_its_properties(tmp_path: Path) -> None:
    file = tmp_path / "kafka.properties"
    file.write_text(SECURE + "statistics.interval.ms=0\n")
    kafka = load(None, file, {}, environ={})
    assert kafka is not None
    assert kafka.librdkafka() == {
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "zkcdc",
        "sasl.password": 'pa"ss\\word',
        "ssl.ca.location": "/etc/zkcdc/ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "statistics.interval.ms": "0",
    }


def test_the_same_connection_for_sparks_java_client(tmp_path: Path) -> None:
    file = tmp_path / "kafka.properties"
    file.write_text(SECURE + "java.ssl.truststore.password=x\nsasl.kerberos.service.name=kafka\n")
    kafka = load(None, file, {}, environ={})
    assert kafka is not None
    java = kafka.java()
    assert java["security.protocol"] == "SASL_SSL"
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="zkcdc" password="pa\\"ss\\\\word";'
    )
    assert java["ssl.truststore.type"] == "PEM"
    assert java["ssl.truststore.location"] == "/etc/zkcdc/ca.pem"
    assert java["ssl.truststore.password"] == "x"  # java.* goes to Java only
    assert java["sasl.kerberos.service.name"] == "kafka"
    assert "java.ssl.truststore.password" not in kafka.librdkafka()


def test_mutual_tls_keys_go_to_java_as_pem_content(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("CERT")
    (tmp_path / "k.pem").write_text("KEY")
    kafka = KafkaConnection(
        bootstrap_servers="b:1",
        security_protocol="SSL",
        ssl_certificate_location=tmp_path / "c.pem",
        ssl_key_location=tmp_path / "k.pem",
        ssl_endpoint_identification_algorithm="none",
    )
    java = kafka.java()
    assert java["ssl.keystore.type"] == "PEM"
    assert (java["ssl.keystore.certificate.chain"], java["ssl.keystore.key"]) == ("CERT", "KEY")
    assert java["ssl.endpoint.identification.algorithm"] == ""


def test_environment_overrides_the_file_and_flags_override_both(tmp_path: Path) -> None:
    file = tmp_path / "kafka.properties"
    file.write_text(SECURE)
    env = {"ZKCDC_KAFKA_SASL_PASSWORD": "from-env", "ZKCDC_KAFKA_SASL_USERNAME": "u2"}
    kafka = load("other:1", file, {"sasl.username": "u3"}, environ=env)
    assert kafka is not None
    config = kafka.librdkafka()
    assert (config["bootstrap.servers"], config["sasl.password"]) == ("other:1", "from-env")
    assert config["sasl.username"] == "u3"


def test_the_file_may_come_from_the_environment(tmp_path: Path) -> None:
    file = tmp_path / "kafka.properties"
    file.write_text(SECURE)
    kafka = load(None, None, {}, environ={"ZKCDC_KAFKA_CONFIG_FILE": str(file)})
    assert kafka is not None and kafka.security_protocol == "SASL_SSL"


def test_no_kafka_at_all_is_none() -> None:
    assert load(None, None, {}, environ={}) is None


def test_secrets_never_show() -> None:
    kafka = KafkaConnection(
        bootstrap_servers="b:1",
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="hunter2",  # type: ignore[arg-type]
        other={"ssl.keystore.password": "hunter3"},  # type: ignore[dict-item]
    )
    shown = repr(kafka) + str(kafka) + kafka.describe() + str(kafka.model_dump())
    assert "hunter2" not in shown and "hunter3" not in shown
    assert kafka.describe() == "b:1 (SASL_SSL, PLAIN as u)"


@pytest.mark.parametrize(
    "name", ["sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.key.pem",
             "sasl.oauthbearer.client.secret", "sasl.jaas.config"],
)  # fmt: skip
def test_secrets_are_refused_on_the_command_line(name: str) -> None:
    assert is_secret_property(name)
    with pytest.raises(KafkaConnectionError, match="not on the command line"):
        refuse_secrets_on_argv({name: "x"})


def test_plain_settings_are_accepted_on_the_command_line() -> None:
    for name in ("security.protocol", "ssl.ca.location", "ssl.ca.pem", "ssl.certificate.pem"):
        assert not is_secret_property(name)
    refuse_secrets_on_argv({"security.protocol": "SSL", "sasl.username": "u"})


@pytest.mark.parametrize(
    ("text", "message"),
    [("security.protocol=SSL\n", "no Kafka given"),
     ("bootstrap.servers=b:1\nsecurity.protocol=TLS\n", "security_protocol"),
     ("bootstrap.servers=b:1\njust a line\n", "line 2: expected name=value")],
)  # fmt: skip
def test_a_bad_file_is_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "kafka.properties"
    file.write_text(text)
    with pytest.raises(KafkaConnectionError, match=message):
        load(None, file, {}, environ={})


def test_an_unreadable_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaConnectionError, match="cannot read Kafka config file"):
        load(None, tmp_path / "missing", {}, environ={})


class _CloseWaitsForItsCoordinator:
    """Stands in for a librdkafka consumer whose close waits for a group coordinator that does
    not answer (confluentinc/librdkafka#3740; seen as every broker came back): only the
    close's wait is under test here."""

    def __init__(self) -> None:
        self.answered = threading.Event()
        self.closed = threading.Event()

    def close(self) -> None:
        self.answered.wait()
        self.closed.set()


def test_a_consumer_whose_close_waits_for_its_coordinator_is_left_closing_after_the_bound() -> None:
    consumer = _CloseWaitsForItsCoordinator()
    began = time.monotonic()
    assert close_consumer(consumer, within_s=0.2) is False
    assert time.monotonic() - began < 5
    consumer.answered.set()  # the coordinator answers: the close ends in the background
    assert consumer.closed.wait(5)
    consumer = _CloseWaitsForItsCoordinator()
    consumer.answered.set()
    assert close_consumer(consumer, within_s=5) is True and consumer.closed.is_set()
