"""`zkcdc ui`'s web app (ASGI, Starlette): the page, a snapshot of the LiveModel, its changes
pushed as server-sent events, and an entity's rows (a partition's history, an alert's causes)."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from zkcdc.streaming.lake.lake_tables import LakeError
from zkcdc.view.lake_moments import LakeMoments
from zkcdc.view.live_model import LiveModel
from zkcdc.view.page import content_security_policy, render

PUSH_EVERY_S = 0.2
# A broker failure at 200,000 partitions put 10,000 alerts in one message: a page spent up to
# 0.5 s parsing and taking it in one task (BENCHMARKS.md, B8). In bites, it can draw and answer between them.
CHANGES_PER_MESSAGE = 2_000


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


class SnapshotCache:
    """The snapshot's JSON (and its gzip), built once per model version: pages opened while
    nothing changed (a quiet cluster, several people) take the same bytes."""

    def __init__(self, model: LiveModel) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._version = -1
        self._raw = b""
        self._gzip: bytes | None = None

    def latest(self) -> tuple[int, bytes]:
        """The newest snapshot's version and JSON."""
        with self._lock:
            self._refresh()
            return self._version, self._raw

    def body(self, gzipped: bool) -> bytes:
        with self._lock:
            self._refresh()
            if not gzipped:
                return self._raw
            if self._gzip is None:
                # Level 1: 200,000 partitions' snapshot took 5.3 s at level 9, no smaller (BENCHMARKS.md, B8).
                self._gzip = gzip.compress(self._raw, compresslevel=1, mtime=0)
            return self._gzip

    def _refresh(self) -> None:
        if self._model.version != self._version:
            taken = self._model.snapshot()
            self._raw, self._gzip = orjson.dumps(taken), None
            self._version = taken["version"]


class SecurityHeaders:
    """Every response says what it is and may not be taken for something else (nosniff), and
    the page runs only its own code (its Content-Security-Policy)."""

    def __init__(self, inner: Any, policy: str) -> None:
        self._inner = inner
        self._headers = [
            (b"x-content-type-options", b"nosniff"),
            (b"content-security-policy", policy.encode()),
            (b"referrer-policy", b"no-referrer"),
        ]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._inner(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self._headers]}
            await send(message)

        await self._inner(scope, receive, with_headers)


def app(model: LiveModel, title: str = "zkcdc", default_min_isr: int = 1) -> Starlette:
    page = render({"mode": "live", "default_min_isr": default_min_isr}, title)

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    snapshots = SnapshotCache(model)

    async def snapshot(request: Request) -> Response:
        gzipped = "gzip" in request.headers.get("accept-encoding", "")
        # Built in a thread: at 200,000 partitions it takes a second or two, during which the
        # event loop goes on pushing changes to the pages already open.
        body = await asyncio.to_thread(snapshots.body, gzipped)
        headers = {"Content-Encoding": "gzip", "Vary": "Accept-Encoding"} if gzipped else {}
        return Response(body, media_type="application/json", headers=headers)

    async def rows(request: Request) -> Response:
        q = request.query_params
        until = q.get("until")
        found = model.rows_of(q.get("cluster", ""), q.get("entity", ""),
                              int(until) if until and until.isdigit() else None)  # fmt: skip
        return _json(found)

    async def healthz(request: Request) -> Response:
        return _json({"ok": True, "loaded": model.loaded, "version": model.version,
                      "read_lag_ms": model.read_lag_ms})  # fmt: skip

    async def events(request: Request) -> StreamingResponse:
        since = request.query_params.get("since", "0")
        version = int(since) if since.isdigit() else 0

        async def stream() -> AsyncIterator[bytes]:
            nonlocal version
            yield b"retry: 1000\n\n"
            quiet = 0
            while not await request.is_disconnected():
                if model.version > version:
                    changes = model.changes_since(version, most=CHANGES_PER_MESSAGE)
                    if changes is None:  # too far behind: the whole again, as a page opening
                        version, data = await asyncio.to_thread(snapshots.latest)
                        yield b"event: snapshot\ndata: " + data + b"\n\n"
                    else:
                        version = changes["version"]
                        yield b"event: changes\ndata: " + orjson.dumps(changes) + b"\n\n"
                    quiet = 0
                    if model.version > version:
                        await asyncio.sleep(0)  # the rest of a storm, a bite at a time
                        continue
                else:
                    quiet += 1
                    if quiet % 50 == 0:  # a comment now and then keeps proxies from timing out
                        yield b": idle\n\n"
                await asyncio.sleep(PUSH_EVERY_S)

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    return _served(
        page,
        [
            Route("/", index),
            Route("/api/snapshot", snapshot),
            Route("/api/rows", rows),
            Route("/api/events", events),
            Route("/healthz", healthz),
        ],
    )


def lake_app(moments: LakeMoments, title: str = "zkcdc: as of") -> Starlette:
    """The page "as of" a past moment: the moments the lake spans, and the model at one."""
    page = render({"mode": "lake"}, title)

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def spans(request: Request) -> Response:
        found = await asyncio.to_thread(moments.spans)
        return _json([{"cluster": s.cluster, "start_ms": s.start_ms, "end_ms": s.end_ms}
                      for s in found])  # fmt: skip

    async def at(request: Request) -> Response:
        q = request.query_params
        t = q.get("t", "")
        if not t.isdigit() or not q.get("cluster"):
            return _json({"error": "give cluster and t (epoch ms)"}, 400)
        try:
            answer = await asyncio.to_thread(moments.at, q["cluster"], int(t))
        except LakeError as exc:  # a moment before the history begins, a cluster not there
            return _json({"error": str(exc)}, 404)
        return _json(answer)

    return _served(page, [Route("/", index), Route("/api/spans", spans), Route("/api/at", at)])


def _served(page: str, routes: list[Route]) -> Starlette:
    # GZip would hold the event stream's small messages back: it skips text/event-stream, and
    # the snapshot, gzipped already (see SnapshotCache); it compresses a partition's rows.
    gzipped = Middleware(GZipMiddleware, minimum_size=4096, compresslevel=1)
    secured = Middleware(SecurityHeaders, policy=content_security_policy(page))
    return Starlette(routes=routes, middleware=[secured, gzipped])
