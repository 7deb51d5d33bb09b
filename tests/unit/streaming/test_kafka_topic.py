"""The job's producing to its topics when Kafka does not acknowledge: the call fails, so the
batch is re-run, and nothing of it is left queued to be sent beside the re-run's records.
The job's own producer (librdkafka's), against a port nothing listens on."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from zkcdc.ground import kafka_connection
from zkcdc.stack.probes import free_port
from zkcdc.streaming.errors import StreamingError
from zkcdc.streaming.sinks.kafka_topic import KafkaOutOfReach, produce_all, sink_producer


def producer(**config: object) -> Producer:
    """The job's sink producer (delivery reports of failed records only), to a closed port."""
    kafka = kafka_connection.load(f"127.0.0.1:{free_port()}", None, {})
    assert kafka is not None
    return sink_producer(kafka, {"log_level": 0, **config})


def test_records_not_acknowledged_in_time_fail_the_call_and_none_stays_queued() -> None:
    out = producer()
    with pytest.raises(KafkaOutOfReach, match=r"records not delivered to t within 0.5 s"):
        produce_all(out, "t", [("k1", "v1"), ("k2", None)], flush_s=0.5)
    assert len(out) == 0  # nothing left to go out once Kafka is back


def test_records_librdkafka_gave_up_on_fail_the_call_too() -> None:
    # A user's shorter message timeout: librdkafka reports each record failed, the queue empty.
    out = producer(**{"message.timeout.ms": 300})
    with pytest.raises(KafkaOutOfReach, match=r"2 record\(s\) not delivered to t: "):
        produce_all(out, "t", [("k1", "v1"), ("k2", "v2")], flush_s=5)


def test_a_record_kafka_refuses_is_an_error_a_re_run_does_not_cure() -> None:
    out = producer(**{"message.max.bytes": 1000})
    with pytest.raises(StreamingError, match="a record not taken for t: ") as raised:
        produce_all(out, "t", [("k", "x" * 5000)], flush_s=5)
    assert not isinstance(raised.value, KafkaOutOfReach)
