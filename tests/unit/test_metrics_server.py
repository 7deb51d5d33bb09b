"""The metrics port: loopback by default; with a web-config (Prometheus exporters' format),
TLS and basic auth; anything else is refused before a byte of metrics goes out."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry, Gauge

from zkcdc.ground.metrics_server import MetricsServerError, serve
from zkcdc.stack.certificates import CertificateAuthority
from zkcdc.stack.probes import free_port_block


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("zkcdc_test_up", "a gauge", registry=registry).set(1)
    return registry


@pytest.fixture
def secured(tmp_path: Path, registry: CollectorRegistry) -> Iterator[tuple[int, Path]]:
    ca = CertificateAuthority(tmp_path)
    pair = ca.issue("metrics")
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(
        f"tls_server_config:\n  cert_file: {pair.certificate.name}\n"
        f"  key_file: {pair.key.name}\nbasic_auth_users:\n  prom: '{hashed}'\n"
    )
    port = free_port_block(1)
    server = serve(registry, "127.0.0.1", port, lambda: (True, "ok"), config)
    yield port, ca.certificate
    server.shutdown()
    server.server_close()


def _get(port: int, ca: Path | None, auth: tuple[str, str] | None, path: str = "/metrics"):
    if ca is None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    else:
        context = ssl.create_default_context(cafile=str(ca))
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def test_plain_metrics_and_health_without_a_web_config(registry: CollectorRegistry) -> None:
    port = free_port_block(1)
    server = serve(registry, "127.0.0.1", port, lambda: (False, "not in sync"))
    try:
        status, body = _get(port, None, None)
        assert status == 200 and b"zkcdc_test_up 1.0" in body
        assert _get(port, None, None, "/healthz") == (503, b"not in sync\n")
    finally:
        server.shutdown()
        server.server_close()


def test_tls_and_basic_auth_let_only_the_right_password_in(secured: tuple[int, Path]) -> None:
    port, ca = secured
    status, body = _get(port, ca, ("prom", "s3cret"))
    assert status == 200 and b"zkcdc_test_up" in body
    assert _get(port, ca, ("prom", "s3cret"), "/healthz")[0] == 200
    for wrong in (None, ("prom", "guess"), ("other", "s3cret")):
        status, body = _get(port, ca, wrong)
        assert status == 401 and b"zkcdc_test_up" not in body


def test_plain_http_gets_nothing_from_a_tls_port(secured: tuple[int, Path]) -> None:
    port, _ = secured
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        _get(port, None, ("prom", "s3cret"))


def test_a_client_that_never_handshakes_does_not_stall_the_others(
    secured: tuple[int, Path],
) -> None:
    port, ca = secured
    with socket.create_connection(("127.0.0.1", port)):
        assert _get(port, ca, ("prom", "s3cret"))[0] == 200


@pytest.mark.parametrize(
    ("text", "message"),
    [("tls_server_config:\n  cert_file: a.pem\n", "needs cert_file and key_file"),
     ("basic_auth: {}\n", "only tls_server_config and basic_auth_users"),
     ("tls_server_config:\n  cert_file: a.pem\n  key_file: b.pem\n", "cannot load")],
)  # fmt: skip
def test_a_bad_web_config_is_one_clear_error(
    tmp_path: Path, registry: CollectorRegistry, text: str, message: str
) -> None:
    config = tmp_path / "web.yml"
    config.write_text(text)
    with pytest.raises(MetricsServerError, match=message):
        serve(registry, "127.0.0.1", free_port_block(1), lambda: (True, ""), config)
