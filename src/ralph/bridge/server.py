"""`ralph bridge`: the loop over JSON-RPC 2.0 on stdio, for editors (vscode-bridge-protocol).

stdout carries protocol lines only (the rpc layer moves fd 1 aside); logs go to stderr.
Events are notifications `{"jsonrpc":"2.0","method":"event","params":{"type":..,"ts":..}}`,
projected from the store, so they agree with `ralph status`. Closing stdin, or SIGTERM,
SIGINT or SIGHUP, stops a running run (its agent too), emits `bridge_stopped` and ends the
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from pydantic import ValidationError

from ralph.bridge.coalesce import FLUSH_S, OutputCoalescer
from ralph.bridge.methods import build_registry, now
from ralph.bridge.models import BridgeStarted, BridgeStopped, _Event
from ralph.bridge.projection import TOPICS, project
from ralph.config import load_config
from ralph.loop import LoopService
from ralph.rpc import Dispatcher, LineServer, fd_server, take_stdio
from ralph.scale.view import RemoteRuns
from ralph.store import Frame, Subscription

log = logging.getLogger("ralph.bridge")
_STOP_WAIT_S = 10.0
_EVENTS_SETTLE_S = 2.0
# An editor ends its bridge with SIGTERM (VS Code's kill()); a terminal with SIGINT or SIGHUP.
_SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Bridge:
    """One bridge: a loop service, its JSON-RPC server and the event projection."""

    def __init__(self, root: Path) -> None:
        # Without a ralph.toml every default applies (an invalid one is an error at start).
        self.service = LoopService(root, config=load_config(root, required=False))
        # `remoteRun` (an extension): runs by id, from $RALPH_TEMPORAL and $RALPH_STORE
        self.remote = RemoteRuns.from_env(lambda: self.service.store)
        self.dispatcher = Dispatcher(build_registry(self.service, self.remote), log=log)
        self._server: LineServer | None = None
        self._events: Subscription | None = None
        self._shutting_down = False

    @property
    def server(self) -> LineServer:
        if self._server is None:
            raise RuntimeError("the bridge is not serving yet")
        return self._server

    def attach(self, server: LineServer) -> None:
        """The JSON-RPC server (on self.dispatcher) that `run` serves."""
        self._server = server

    async def run(self) -> None:
        store = self.service.store
        self._events = store.subscribe(after_seq=store.last_seq)
        forwarder = asyncio.create_task(self._forward(self._events))
        await self.server.notify("event", BridgeStarted(ts=now()).model_dump())
        serving = asyncio.create_task(self.server.serve())
        eof = asyncio.create_task(self.server.at_eof.wait())
        try:
            await asyncio.wait({serving, eof}, return_when=asyncio.FIRST_COMPLETED)
            # Input closed (or a signal asked to shut down). Refuse what was received but has
            # not started, stop what runs (its agent's process group too), answer the
            # requests in flight, wait for the run to end, then let its last events out.
            self.service.refuse_new_work("the bridge is closing")
            self.service.stop()
            await serving
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.service.stop_and_wait(), _STOP_WAIT_S)
            await self._settle_events()
        finally:
            eof.cancel()
            for task in (serving, forwarder):
                task.cancel()
            await asyncio.gather(serving, forwarder, return_exceptions=True)
            self.remote.close()
            await self.service.aclose()
        await self.server.notify("event", BridgeStopped(ts=now()).model_dump())

    def shutdown(self) -> None:
        """SIGTERM, SIGINT, SIGHUP: end as at EOF; a second signal cancels what is in flight."""
        if self._shutting_down:
            log.warning("bridge: second signal: cancelling the requests in flight")
            self.server.close()
            return
        self._shutting_down = True
        log.info("bridge: signal received: shutting down")
        self.server.stop_reading()

    async def _forward(self, frames: Subscription) -> None:
        """Store frames to events, in order; the agent's output coalesced (see
        ralph.bridge.coalesce), flushed before any other event and every FLUSH_S."""
        output = OutputCoalescer(self._send)
        lock = asyncio.Lock()
        ticker = asyncio.create_task(self._flush_when_due(output, lock))
        try:
            async for frame in frames:
                async with lock:
                    try:
                        await self._forward_one(frame, output)
                    except (ValidationError, TypeError, ValueError, KeyError) as exc:
                        # Anyone may append to a run's stream: an odd frame is skipped (and
                        # said on stderr), the events after it still reach the client.
                        log.warning("bridge: frame %s (%s) cannot be an event: %s",
                                    frame.seq, frame.topic, str(exc).splitlines()[0])
        finally:
            ticker.cancel()

    async def _forward_one(self, frame: Frame, output: OutputCoalescer) -> None:
        if frame.topic == "agent.output":
            await output.add(frame)
        elif frame.topic in TOPICS:
            event = project(frame)
            if event is not None:
                await output.flush()
                await self._send(event)

    async def _flush_when_due(self, output: OutputCoalescer, lock: asyncio.Lock) -> None:
        while True:
            await asyncio.sleep(FLUSH_S / 2)
            if output.due():
                async with lock:
                    await output.flush()

    async def _send(self, event: _Event) -> None:
        await self.server.notify("event", event.model_dump())

    async def _settle_events(self) -> None:
        """Let the events of what just ended (run_stopped) reach the client before leaving."""
        frames = self._events
        if frames is None:
            return
        target = self.service.store.last_seq
        deadline = asyncio.get_running_loop().time() + _EVENTS_SETTLE_S
        while frames.cursor < target and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)


async def serve_stdio(root: Path) -> None:
    read_fd, write_fd = take_stdio()  # before anything else can read stdin or write stdout
    bridge = Bridge(root)
    # A pipe (what an editor gives its bridge) is served by the pipe server: many requests
    # per read and one write per turn of the event loop; a regular file by the stream one.
    server, writer = await fd_server(bridge.dispatcher, read_fd, write_fd)
    bridge.attach(server)
    loop = asyncio.get_running_loop()
    for sig in _SHUTDOWN_SIGNALS:
        loop.add_signal_handler(sig, bridge.shutdown)
    try:
        await bridge.run()
    finally:
        for sig in _SHUTDOWN_SIGNALS:
            loop.remove_signal_handler(sig)
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()
