"""The Kafka connection as Spark's source takes it."""

from __future__ import annotations

from zkcdc.ground import kafka_connection
from zkcdc.streaming.job.change_source import spark_kafka_options


def test_a_java_client_timeout_given_bounds_the_executors_reads_too() -> None:
    given = kafka_connection.load("b:9092", None, {"java.default.api.timeout.ms": "5000"})
    assert given is not None
    options = spark_kafka_options(given)
    assert options["kafka.default.api.timeout.ms"] == "5000"
    assert options["kafkaConsumer.pollTimeoutMs"] == "5000"
    plain = kafka_connection.load("b:9092", None, {})
    assert plain is not None
    assert spark_kafka_options(plain) == {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }
