"""`zkcdc ui`'s web app (ASGI, Starlette): the page, a snapshot of the LiveModel, its changes
pushed as server-sent events, and an entity's rows (a partition's history, an alert's causes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from zkcdc.view.live_model import LiveModel
from zkcdc.view.page import render

PUSH_EVERY_S = 0.2


def _json(value: Any) -> Response:
    return Response(orjson.dumps(value), media_type="application/json")


def app(model: LiveModel, title: str = "zkcdc", default_min_isr: int = 1) -> Starlette:
    page = render({"mode": "live", "default_min_isr": default_min_isr}, title)

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def snapshot(request: Request) -> Response:
        return _json(model.snapshot())

    async def rows(request: Request) -> Response:
        q = request.query_params
        until = q.get("until")
        found = model.rows_of(q.get("cluster", ""), q.get("entity", ""),
                              int(until) if until and until.isdigit() else None)  # fmt: skip
        return _json(found)

    async def healthz(request: Request) -> Response:
        return _json({"ok": True, "loaded": model.loaded, "version": model.version})

    async def events(request: Request) -> StreamingResponse:
        since = request.query_params.get("since", "0")
        version = int(since) if since.isdigit() else 0

        async def stream() -> AsyncIterator[bytes]:
            nonlocal version
            yield b"retry: 1000\n\n"
            quiet = 0
            while not await request.is_disconnected():
                if model.version > version:
                    changes = model.changes_since(version)
                    kind = b"changes"
                    if changes is None:
                        changes, kind = model.snapshot(), b"snapshot"
                    version = changes["version"]
                    yield b"event: " + kind + b"\ndata: " + orjson.dumps(changes) + b"\n\n"
                    quiet = 0
                else:
                    quiet += 1
                    if quiet % 50 == 0:  # a comment now and then keeps proxies from timing out
                        yield b": idle\n\n"
                await asyncio.sleep(PUSH_EVERY_S)

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    routes = [
        Route("/", index),
        Route("/api/snapshot", snapshot),
        Route("/api/rows", rows),
        Route("/api/events", events),
        Route("/healthz", healthz),
    ]
    # GZip would hold the event stream's small messages back: it skips text/event-stream.
    return Starlette(routes=routes, middleware=[Middleware(GZipMiddleware, minimum_size=4096)])
