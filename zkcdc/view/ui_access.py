"""Who may see `zkcdc ui`: the same web config as the metrics port (Prometheus exporters'
format: TLS and basic auth with bcrypt hashes), and no serving beyond loopback without
authentication unless the operator says `--insecure-no-auth` in so many words: the page shows
every broker, topic, config change and alert of the clusters."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from zkcdc.ground.metrics_server import BasicAuthChecker, WebConfig
from zkcdc.view.errors import ViewError

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: may resolve anywhere


def check_exposure(host: str, config: WebConfig, insecure: bool) -> None:
    """One clear line when the page would be served beyond this machine to anyone."""
    if is_loopback(host) or config.users or insecure:
        return
    raise ViewError(
        f"--host {host} serves every broker, topic, config change and alert to whoever reaches "
        f"it: give --web-config with basic_auth_users (and TLS), or say --insecure-no-auth"
    )


class BasicAuth:
    """ASGI middleware: every request (the page, its API, its event stream) needs the
    credentials of a user in the web config, but /healthz; without users it lets everything
    through."""

    def __init__(self, inner: ASGIApp, config: WebConfig) -> None:
        self._inner = inner
        self._checker = BasicAuthChecker(config.users)
        self._on = bool(config.users)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        # /healthz (loaded flags, a version number, read lag) stays open to liveness probes.
        if (
            not self._on
            or scope["type"] not in ("http", "websocket")
            or scope["path"] == "/healthz"
        ):
            await self._inner(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        if self._checker.allows(header or None):
            await self._inner(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({
            "type": "http.response.start", "status": 401,
            "headers": [(b"www-authenticate", b'Basic realm="zkcdc", charset="UTF-8"'),
                        (b"content-type", b"text/plain; charset=utf-8")],
        })  # fmt: skip
        await send({"type": "http.response.body", "body": b"zkcdc ui: credentials needed\n"})
