"""Who may see the ui: loopback is open, any other address needs users (or the operator's
explicit --insecure-no-auth); with users every path but /healthz needs their credentials."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import bcrypt
import pytest

from zkcdc.ground.metrics_server import WebConfig
from zkcdc.view.errors import ViewError
from zkcdc.view.ui_access import BasicAuth, check_exposure

USERS = WebConfig(users={"op": bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4))})


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_authentication(host: str) -> None:
    check_exposure(host, WebConfig(), insecure=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "ui.example.com"])
def test_any_other_address_needs_users_or_the_operators_explicit_word(host: str) -> None:
    with pytest.raises(ViewError, match="--insecure-no-auth"):
        check_exposure(host, WebConfig(), insecure=False)
    check_exposure(host, USERS, insecure=False)
    check_exposure(host, WebConfig(), insecure=True)


def _call(app: WebConfig, path: str, auth: str | None, kind: str = "http") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    headers = [] if auth is None else [(b"authorization", auth.encode())]

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(BasicAuth(inner, app)({"type": kind, "path": path, "headers": headers}, None, send))
    return sent


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("path", ["/", "/api/snapshot", "/api/events", "/api/rows"])
def test_every_path_needs_credentials_and_healthz_stays_open(path: str) -> None:
    assert _call(USERS, path, None)[0]["status"] == 401
    assert _call(USERS, path, _basic("op", "wrong"))[0]["status"] == 401
    assert _call(USERS, path, _basic("op", "pw"))[0]["status"] == 200
    assert _call(USERS, "/healthz", None)[0]["status"] == 200
    assert _call(WebConfig(), path, None)[0]["status"] == 200
    assert _call(USERS, path, None, "websocket")[0] == {"type": "websocket.close", "code": 1008}
