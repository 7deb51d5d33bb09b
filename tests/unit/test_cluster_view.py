"""`stack status` reads broker endpoints from every registration version Kafka wrote."""

from __future__ import annotations

from zkcdc.stack.cluster_view import broker_endpoint


def test_v5_registration_gives_its_first_endpoint():
    v5 = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.1:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"127.0.0.1","version":5,"timestamp":"1700000000000"}'
    )
    assert broker_endpoint(v5) == "PLAINTEXT://127.0.0.1:9092"


def test_v1_registration_gives_host_and_port():
    v1 = (
        b'{"jmx_port":-1,"timestamp":"1433310345045","host":"192.168.1.10","version":1,"port":9092}'
    )
    assert broker_endpoint(v1) == "192.168.1.10:9092"


def test_garbage_is_shown_as_unknown():
    assert broker_endpoint(b"\xff not json") == "?"
