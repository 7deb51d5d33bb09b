"""The one page both views use: `static/page.html` with its style, script and data inlined, so
a report is a single file that opens without a network (nothing is fetched from elsewhere)."""

from __future__ import annotations

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
