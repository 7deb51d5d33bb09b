"""The ui's responses: each says nosniff, and the page's Content-Security-Policy lets it run
only its own script and style (named by their hashes), with nothing fetched from elsewhere.
A script smuggled into the page (in an alert's text, say) would have no hash and not run; the
page itself runs under the policy in chromium (tests/integration/test_live_ui.py)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
from typing import Any

from zkcdc.view.live_model import LiveModel
from zkcdc.view.page import content_security_policy, render
from zkcdc.view.web_app import app


def get(path: str) -> tuple[int, dict[str, str], bytes]:
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": [], "scheme": "http", "http_version": "1.1",
             "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 5000), "root_path": ""}  # fmt: skip
    asyncio.run(app(LiveModel())(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], headers, body


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_every_response_says_nosniff_and_the_page_its_policy() -> None:
    for path in ("/", "/api/snapshot", "/healthz"):
        status, headers, _ = get(path)
        assert status == 200 and headers["x-content-type-options"] == "nosniff", path
        assert "default-src 'none'" in headers["content-security-policy"], path


def test_the_policy_names_exactly_the_pages_own_scripts_and_style() -> None:
    _, headers, body = get("/")
    page = body.decode()
    policy = headers["content-security-policy"]
    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, flags=re.S)
    assert len(scripts) == 2 and len(styles) == 1
    script_src = re.search(r"script-src ([^;]*);", policy)
    assert script_src is not None
    assert script_src[1].split() == [_hash(s) for s in scripts]
    assert f"style-src {_hash(styles[0])};" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_a_script_in_the_pages_data_gets_no_hash() -> None:
    """Data is escaped into the data script; a hash names that script as rendered, so no other
    script element can appear and run."""
    page = render({"mode": "live", "note": "</script><script>alert(1)</script>"}, "t")
    assert page.count("<script>") == 2
    assert content_security_policy(page).count("'sha256-") == 3  # two scripts, one style
