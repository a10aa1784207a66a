"""The HTTP and WebSocket routes of `ralph serve` (a Starlette app):

- `GET /` and `GET /web/...`: the web monitor (ralph/web/, static files), without a token:
  the page holds no data, it asks for everything over /ws with the token it is given;
- `GET /health`: `{"status": "ok"}`, without a token (nothing else is said without one);
- `GET /api/status`: the `status/get` result;
- `GET /api/rpc/discover`: the OpenRPC document of the methods, `servers[0].url` the
  WebSocket's real address;
- `GET /api/remote-runs/{run_id}?after=SEQ&limit=N` (an extension): a run by its id, its
  status and a page of its events (ralph.scale.view, the bridge's `remoteRun` result);
- `/ws`: JSON-RPC 2.0 over WebSocket (ralph.remote.clients).

Every route but /health and the web monitor's files needs the token (ralph.remote.auth):
HTTP 401 without it, and a refused upgrade (HTTP 403) for a WebSocket, as for a browser
page of another origin. On a
loopback address every request must name the server's own host (127.0.0.1, localhost, ::1
with its port): HTTP 421 otherwise, a refused upgrade for a WebSocket (DNS rebinding).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from ralph.bridge.projection import run_event
from ralph.errors import RalphError
from ralph.remote.auth import given_token, origin_ok, token_ok
from ralph.remote.methods import RemoteState, status
from ralph.rpc import Dispatcher, Registry
from ralph.scale.view import DEFAULT_LIMIT, BadRunQuery, RemoteRuns, RunNotFound

OPEN_PATHS = ("/health", "/")
WEB_PREFIX = "/web/"  # the web monitor's files: open too
WEB_DIR = Path(__file__).resolve().parent.parent / "web"
# The page's own files only, and its WebSocket: no inline script, no other site, no frame;
# and no Referer: the address a person opened may still hold the token.
WEB_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


class WebFiles:
    """The web monitor's static files, with WEB_HEADERS."""

    def __init__(self) -> None:
        self.files = StaticFiles(directory=WEB_DIR)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *_ENCODED_HEADERS]
            await send(message)

        await self.files(scope, receive, send_with_headers)


_HOST = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]+)?")


def page_headers(request: Request) -> dict[str, str]:
    """WEB_HEADERS, the page's WebSocket named in connect-src as well: a browser that does
    not count ws: as 'self' (older Safari) may still connect. Only a host name or IPv4
    address (with its port) is named: nothing else a Host header holds reaches the policy,
    and an IPv6 address is not a valid CSP source (that page relies on 'self')."""
    host = request.headers.get("host", "")
    if not _HOST.fullmatch(host):
        return WEB_HEADERS
    policy = WEB_HEADERS["Content-Security-Policy"].replace(
        "connect-src 'self'", f"connect-src 'self' ws://{host} wss://{host}")
    return {**WEB_HEADERS, "Content-Security-Policy": policy}


_ENCODED_HEADERS = [(k.lower().encode(), v.encode()) for k, v in WEB_HEADERS.items()]


class Guard:
    """The token on every request but OPEN_PATHS; the origin on every WebSocket upgrade."""

    def __init__(self, app: ASGIApp, token: str | None, allowed_origins: Sequence[str],
                 hosts: frozenset[str] | None) -> None:
        self.app = app
        self.token = token
        self.allowed_origins = tuple(allowed_origins)
        self.hosts = hosts  # the Host values answered to (None: any)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if self.hosts is not None and host.lower() not in self.hosts:
            await self._refuse(scope, receive, send, 421, "this server answers to its own "
                               "address only (127.0.0.1 or localhost with its port)")
            return
        if scope["type"] == "http" and (scope["path"] in OPEN_PATHS
                                        or scope["path"].startswith(WEB_PREFIX)):
            await self.app(scope, receive, send)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        allowed = token_ok(given_token(headers, query), self.token)
        if scope["type"] == "websocket":
            allowed = allowed and origin_ok(headers.get("origin"),
                                            self.hosts if self.hosts is not None else {host},
                                            self.allowed_origins)
            if not allowed:  # closing before accepting refuses the upgrade (HTTP 403)
                await send({"type": "websocket.close", "code": 1008})
                return
        elif not allowed:
            response = JSONResponse({"error": "a valid token is needed: "
                                              "Authorization: Bearer TOKEN, or ?token=TOKEN"},
                                    status_code=401,
                                    headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int,
                      message: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await JSONResponse({"error": message}, status_code=status)(scope, receive, send)


def _count(request: Request, name: str, default: int) -> int:
    """A query parameter that must be a whole number (BadRunQuery otherwise)."""
    given = request.query_params.get(name)
    if given is None or given == "":
        return default
    if not given.isascii() or not given.isdigit() or len(given) > 19:
        raise BadRunQuery(f"{name} must be a whole number, not {given!r}")
    return int(given)


async def remote_run_response(remote: RemoteRuns, request: Request) -> Response:
    """`GET /api/remote-runs/{run_id}`: the view of ralph.scale.view (its events as the
    bridge's with their `seq`); 400 for a bad id or query, 404 for an unknown run, 502 when
    Temporal or the shared store cannot be asked; `{"error": ...}` as every error here."""
    try:
        view = await remote.view(request.path_params["run_id"],
                                 events_after=_count(request, "after", 0),
                                 limit=_count(request, "limit", DEFAULT_LIMIT),
                                 project=run_event)
    except BadRunQuery as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    except RunNotFound as exc:
        return JSONResponse({"error": str(exc)}, status_code=404)
    except RalphError as exc:
        return JSONResponse({"error": str(exc)}, status_code=502)
    return JSONResponse(view)


def build_app(state: RemoteState, registry: Registry, *, token: str | None,
              allowed_origins: Sequence[str], ws_url: str,
              hosts: frozenset[str] | None) -> ASGIApp:
    dispatcher = Dispatcher(registry)

    async def index(request: Request) -> Response:
        return FileResponse(WEB_DIR / "index.html", headers=page_headers(request))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def api_status(request: Request) -> Response:
        return JSONResponse(status(state).model_dump())

    remote = state.remote_runs
    if remote is None:
        remote = state.remote_runs = RemoteRuns.from_env(lambda: state.loop.store)

    async def remote_run(request: Request) -> Response:
        return await remote_run_response(remote, request)

    async def discover(request: Request) -> Response:
        document: dict[str, Any] = registry.openrpc()
        document["servers"] = [{"name": "ralph serve", "url": ws_url}]
        return JSONResponse(document)

    async def websocket(websocket: WebSocket) -> None:
        await websocket.accept()
        client = state.hub.join(websocket, dispatcher)
        try:
            await client.serve()
        finally:
            state.hub.clients.discard(client)

    app = Starlette(routes=[
        Route("/", index),
        Mount("/web", app=WebFiles()),
        Route("/health", health),
        Route("/api/status", api_status),
        Route("/api/rpc/discover", discover),
        Route("/api/remote-runs/{run_id}", remote_run),  # an extension
        WebSocketRoute("/ws", websocket),
    ])
    return Guard(app, token, allowed_origins, hosts)
