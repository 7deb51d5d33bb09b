"""`/metrics` (Prometheus), `/healthz` and `/livez` of a zkcdc process, on loopback unless told otherwise,
with optional TLS and basic auth from a web-config file in the format of Prometheus's own
exporters (exporter-toolkit): `tls_server_config: {cert_file, key_file}` and
`basic_auth_users: {name: bcrypt hash}`."""

from __future__ import annotations

import base64
import binascii
import hmac
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import bcrypt
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from zkcdc.ground.errors import ZkcdcError
from zkcdc.ground.secret_files import check_secret_file

Health = Callable[[], tuple[bool, str]]


class MetricsServerError(ZkcdcError):
    pass


@dataclass(frozen=True)
class WebConfig:
    cert_file: Path | None = None
    key_file: Path | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # name -> bcrypt hash

    @classmethod
    def load(cls, path: Path) -> WebConfig:
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise MetricsServerError(f"cannot read web config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise MetricsServerError(f"web config {path} is not YAML: {exc}") from exc
        if not isinstance(raw, dict) or set(raw) - {"tls_server_config", "basic_auth_users"}:
            raise MetricsServerError(
                f"web config {path}: only tls_server_config and basic_auth_users are known"
            )
        tls = raw.get("tls_server_config") or {}
        users = raw.get("basic_auth_users") or {}
        if not isinstance(tls, dict) or not isinstance(users, dict):
            raise MetricsServerError(f"web config {path}: sections must be mappings")
        if bool(tls.get("cert_file")) != bool(tls.get("key_file")):
            raise MetricsServerError(f"web config {path}: TLS needs cert_file and key_file")

        def near(name: str | None) -> Path | None:
            return None if not name else (path.parent / name)  # relative to the file

        check_secret_file(path, ["basic_auth_users"] if users else [])
        key_file = near(tls.get("key_file"))
        if key_file is not None:
            check_secret_file(key_file, ["a TLS private key"])
        return cls(
            near(tls.get("cert_file")),
            key_file,
            {str(k): str(v).encode() for k, v in users.items()},
        )


class BasicAuthChecker:
    """Basic-auth checks; bcrypt is slow on purpose, so a scrape's known-good header is cached."""

    def __init__(self, users: dict[str, bytes]) -> None:
        self._users = users
        self._good: set[str] = set()
        self._lock = threading.Lock()

    def allows(self, header: str | None) -> bool:
        if not self._users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        with self._lock:
            if any(hmac.compare_digest(header, good) for good in self._good):
                return True
        try:
            name, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self._users.get(name)
        try:
            ok = hashed is not None and bcrypt.checkpw(password.encode(), hashed)
        except ValueError:
            ok = False
        if ok:
            with self._lock:
                self._good.add(header)
        return ok


def serve(
    registry: CollectorRegistry,
    host: str,
    port: int,
    healthy: Health,
    web_config: Path | None = None,
    what: str = "--metrics-port",
    alive: Health | None = None,
) -> ThreadingHTTPServer:
    """`/metrics`, `/healthz` (`healthy`: ready to do its work) and `/livez` (`alive`: not
    wedged, so not one to restart; `healthy` when not given)."""
    live = alive or healthy
    config = WebConfig.load(web_config) if web_config is not None else WebConfig()
    checker = BasicAuthChecker(config.users)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not checker.allows(self.headers.get("Authorization")):
                self._send(401, b"unauthorized\n", "text/plain", realm=True)
            elif self.path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif self.path in ("/healthz", "/livez"):
                ok, reason = (healthy if self.path == "/healthz" else live)()
                self._send(200 if ok else 503, reason.encode() + b"\n", "text/plain")
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, status: int, body: bytes, kind: str, realm: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if realm:
                self.send_header("WWW-Authenticate", 'Basic realm="zkcdc"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would drown the process's own log

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise MetricsServerError(
            f"cannot serve metrics on {host}:{port} ({what}): {exc.strerror}"
        ) from exc
    if config.cert_file is not None and config.key_file is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(config.cert_file, config.key_file)
        except (OSError, ssl.SSLError) as exc:
            server.server_close()
            raise MetricsServerError(f"cannot load the metrics TLS key pair: {exc}") from exc
        # The handshake on the handler's thread: a client that never sends one must not stall
        # the accepting loop.
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
