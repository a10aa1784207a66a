"""`ralph serve`: the remote API's process. It binds its socket itself (a port that is taken
is an error naming it, not uvicorn's exit), writes `.ralph/serve.json` {pid, ws, http, token}
(mode 0600) for local clients while it runs, sends `event/heartbeat` to every client, and on
SIGINT, SIGTERM or `shutdown` closes every client's connection (1001, going away) and exits
0. Uvicorn's own signal handling is left out: it would re-raise the signal at the end, and
the process would end killed rather than with 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import signal
import socket
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ralph.config import Config, load_config
from ralph.fsutil import atomic_write_bytes
from ralph.loop import LoopService
from ralph.proc import process_runs
from ralph.remote.agent_methods import AgentSeat
from ralph.remote.app import build_app
from ralph.remote.auth import ServeError, check_binding, own_hosts
from ralph.remote.clients import Hub
from ralph.remote.events import projector
from ralph.remote.limits import MAX_MESSAGE_BYTES
from ralph.remote.methods import RemoteState, build_registry
from ralph.remote.watcher import watch_repository
from ralph.sessions import SessionService
from ralph.store import Store

log = logging.getLogger("ralph.remote")

DEFAULT_PORT = 8766
HEARTBEAT_S = 30.0
SERVE_FILE = "serve.json"
GOING_AWAY = 1001


@dataclass(frozen=True)
class ServeOptions:
    root: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None  # None: --no-auth
    allowed_origins: Sequence[str] = ()
    heartbeat_s: float = HEARTBEAT_S


GRACE_S = 3  # open connections get this long at the end before they are cut
ABORT_AFTER_S = 5  # a connection whose handler ended, still holding unsent data after this


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # ours: see the module's docstring


class _WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, but a connection whose peer stopped reading is cut
    (aborted) once its handler has ended: closing it would wait for ever for the data to
    leave, holding the socket (a dropped slow client, a close frame nobody reads)."""

    async def run_asgi(self) -> None:
        try:
            await super().run_asgi()
        finally:
            self.loop.call_later(ABORT_AFTER_S, self._abort_if_stuck)

    def _abort_if_stuck(self) -> None:
        transport = self.transport
        if transport is not None and transport.get_write_buffer_size() > 0:
            transport.abort()


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        why = ("is already in use" if exc.errno == errno.EADDRINUSE
               else f"cannot be used: {exc.strerror}")
        raise ServeError(f"port {port} on {host} {why} (choose another with --port)") \
            from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def urls(host: str, port: int) -> tuple[str, str]:
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return f"ws://{shown}:{port}/ws", f"http://{shown}:{port}"


async def serve(options: ServeOptions,
                started: Callable[[str, str], None] | None = None) -> int:
    """Serve until a signal or `shutdown`; 0. `started(ws_url, http_url)` once it listens."""
    check_binding(options.host, options.token)
    config = load_config(options.root, required=False)
    other = running_server(options.root / ".ralph" / SERVE_FILE)
    if other is not None:
        raise ServeError(f"ralph serve already runs for this project (pid {other['pid']}, "
                         f"{other['ws']}): stop it first, or use that one")
    sock = bind(options.host, options.port)
    try:
        with Store(options.root / ".ralph" / "store") as store:
            sessions = SessionService(options.root, config, store)
            loop_service = LoopService(options.root, config=config, store=store)
            try:
                return await _serve(options, config, sock, sessions, loop_service, started)
            finally:
                loop_service.refuse_new_work("ralph serve is shutting down")
                await sessions.aclose()  # (stopped already on a clean end)
                await loop_service.aclose()
    finally:
        sock.close()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


async def _serve(options: ServeOptions, config: Config, sock: socket.socket,
                 sessions: SessionService, loop_service: LoopService,
                 started: Callable[[str, str], None] | None) -> int:
    port = int(sock.getsockname()[1])
    ws_url, http_url = urls(options.host, port)
    store = sessions.store
    hub = Hub(store, projector(sessions.text), cursor=store.last_seq)
    state = RemoteState(options.root, config, hub, AgentSeat(sessions, config),
                        loop_service, watcher_enabled=True)
    registry = build_registry(state)
    app = build_app(state, registry, token=options.token,
                    allowed_origins=options.allowed_origins, ws_url=ws_url,
                    hosts=own_hosts(options.host, port))
    server = _Server(uvicorn.Config(app, ws_max_size=MAX_MESSAGE_BYTES, log_level="warning",
                                    ws_per_message_deflate=False,
                                    lifespan="off", ws=_WebSocketProtocol, access_log=False,
                                    timeout_graceful_shutdown=GRACE_S))
    loop = asyncio.get_running_loop()

    def signalled() -> None:
        if state.shutdown.is_set():  # a second Ctrl-C: no more waiting
            server.force_exit = True
        state.shutdown.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, signalled)
    serve_file = options.root / ".ralph" / SERVE_FILE
    helpers = [loop.create_task(_heartbeat(state, options.heartbeat_s)),
               loop.create_task(_stop_when_asked(state, server, sessions, loop_service)),
               loop.create_task(_publish(hub)),
               loop.create_task(watch_repository(options.root, store))]
    serving = loop.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if serving.done():
            await serving
            raise ServeError("the server could not start")
        try:
            _write_serve_file(serve_file, ws_url, http_url, options.token)
            if started is not None:
                started(ws_url, http_url)
        except BaseException:
            state.shutdown.set()
            raise
        await serving
    finally:
        for task in (*helpers, serving):
            task.cancel()
        await asyncio.gather(*helpers, serving, return_exceptions=True)
        if state.remote_runs is not None:
            state.remote_runs.close()
        _remove_serve_file(serve_file)
    # The signal handlers stay until the agents are stopped (in `serve`): a Ctrl-C meanwhile
    # must not end the process with a KeyboardInterrupt.
    return 0


async def _publish(hub: Hub) -> None:
    """Every frame's events, as they are recorded (in any process), to every client."""
    assert hub.store is not None
    async with hub.store.subscribe(after_seq=hub.cursor) as frames:
        async for frame in frames:
            hub.publish(frame)


async def _stop_when_asked(state: RemoteState, server: uvicorn.Server,
                           sessions: SessionService, loop_service: LoopService) -> None:
    """The agents and the loop's run or step first (their clients see them stop), then the
    clients, then the server."""
    await state.shutdown.wait()
    loop_service.refuse_new_work("ralph serve is shutting down")
    await asyncio.gather(sessions.aclose(), loop_service.stop_and_wait(),
                         *state.loop_steps, return_exceptions=True)
    await asyncio.sleep(0.3)  # their last events reach the clients
    state.hub.close_all(GOING_AWAY, "the server is shutting down")
    await asyncio.sleep(0.2)  # the close frames out before uvicorn ends the connections
    server.should_exit = True


def running_server(path: Path) -> dict[str, object] | None:
    """The serve.json of a server that still runs (None: none, or a stale one)."""
    try:
        info = json.loads(path.read_text())
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid() or not process_runs(pid):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists() and b"serve" not in cmdline.read_bytes():
        return None  # the pid went to another program
    return dict(info)


def _remove_serve_file(path: Path) -> None:
    """Ours only: another server's file stays."""
    try:
        if int(json.loads(path.read_text())["pid"]) == os.getpid():
            path.unlink()
    except (OSError, ValueError, KeyError, TypeError):
        pass


async def _heartbeat(state: RemoteState, every_s: float) -> None:
    sequence = 0
    while True:
        await asyncio.sleep(every_s)
        if not len(state.hub):
            continue
        sequence += 1
        state.hub.broadcast("event/heartbeat", {
            "server_time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "sequence": sequence, "agent_status": state.seat.state(),
            "uptime_seconds": state.uptime_seconds})


def _write_serve_file(path: Path, ws_url: str, http_url: str, token: str | None) -> None:
    """{pid, ws, http, token}, readable by this user only (it holds the token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps({"pid": os.getpid(), "ws": ws_url, "http": http_url,
                                         "token": token}).encode(), durable=False, mode=0o600)
