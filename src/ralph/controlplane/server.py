"""The control plane's process: JSON-RPC 2.0 on stdin/stdout (one message a line; stdout
carries protocol messages only, logs go to stderr), until stdin closes or a signal."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from ralph.controlplane.methods import build_registry
from ralph.controlplane.plane import Plane
from ralph.rpc import Dispatcher, fd_server, take_stdio
from ralph.rpc.jsoncodec import dumps

log = logging.getLogger("ralph.controlplane")
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def serve_stdio() -> None:
    read_fd, write_fd = take_stdio()  # before anything else can read stdin or write stdout
    plane = Plane()
    dispatcher = Dispatcher(build_registry(plane), log=log)
    server, writer = await fd_server(dispatcher, read_fd, write_fd)
    plane.notify = server.notify
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        loop.add_signal_handler(sig, server.stop_reading)
    # At EOF (or a signal) the server answers what it received before it ends; a request
    # waiting on a session (`session.collect`) would wait for ever, so the sessions and
    # subscriptions are stopped then, not after.
    closing = asyncio.create_task(_close_at_eof(server.at_eof, plane))
    try:
        await server.serve()
    finally:
        closing.cancel()
        for sig in _SIGNALS:
            loop.remove_signal_handler(sig)
        await plane.close()
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()


async def _close_at_eof(at_eof: asyncio.Event, plane: Plane) -> None:
    await at_eof.wait()
    await plane.close()


async def call_once(method: str, params: object) -> bytes:
    """One request answered by the same dispatcher (`ac rpc:call`): the response line."""
    plane = Plane()
    dispatcher = Dispatcher(build_registry(plane), log=log)
    request: dict[str, object] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        request["params"] = params
    try:
        answer = await dispatcher.handle(dumps(request))
    finally:
        await plane.close()
    assert answer is not None  # (a request with an id is always answered)
    return answer
