"""The one page both views use: `static/page.html` with its style, script and data inlined, so
a report is a single file that opens without a network (nothing is fetched from elsewhere)."""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from typing import Any

import orjson


def _static(name: str) -> str:
    return (resources.files("zkcdc.view") / "static" / name).read_text()


def render(data: dict[str, Any], title: str) -> str:
    """The page with `data` (mode `live` or `incident`) for its script."""
    # "</script" or "<!--" inside the data would end the script element early (or make the
    # parser skip its end): every "<" escaped as JSON allows; it only occurs inside strings.
    payload = orjson.dumps(data).decode().replace("<", "\\u003c")
    return (
        _static("page.html")
        .replace("{{TITLE}}", _html_escape(title))
        .replace("/*{{STYLE}}*/", _static("style.css"))
        .replace("/*{{SCRIPT}}*/", _static("app.js").replace("</", "<\\/"))
        .replace("/*{{DATA}}*/null", payload)
    )


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def content_security_policy(page: str) -> str:
    """The page's Content-Security-Policy: nothing from elsewhere, and of inline code only its
    own script and style elements, each named by its hash (a script that an alert's text could
    smuggle in would have none); the page's own API for its data."""

    def hashes(tag: str) -> str:
        bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.S)
        return " ".join(
            f"'sha256-{base64.b64encode(hashlib.sha256(b.encode()).digest()).decode()}'"
            for b in bodies
        )

    return (
        f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )
