"""Connection: one peer's requests in flight and the server's messages to it, without framing.

A transport (NDJSON lines, WebSocket frames) hands each incoming message to `submit` and gives
the connection a `send` coroutine for one outgoing message. What every transport needs is
here once:

- each request runs in its own task, so a slow handler never delays a fast one and responses
  go out in the order they are ready;
- at most `max_in_flight` requests run at once: `submit` waits for a free slot, which stops the
  transport from reading more (backpressure instead of unbounded memory);
- every outgoing message, response or notification, goes through one lock, so messages never
  interleave, and a failed send (the peer is gone) closes the connection instead of raising
  in whichever task happened to write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ralph.rpc.dispatcher import Dispatcher
from ralph.rpc.envelope import notification

__all__ = ["Connection"]

Send = Callable[[bytes], Awaitable[None]]


class Connection:
    """Runs a peer's requests concurrently and serializes everything sent to it."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        send: Send,
        *,
        max_in_flight: int = 256,
        on_lost: Callable[[], None] | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._dispatcher = dispatcher
        self._send = send
        self._slots = asyncio.Semaphore(max_in_flight)
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_lost = on_lost
        self._log = log or logging.getLogger("ralph.rpc")
        self._lost = False

    @property
    def in_flight(self) -> int:
        """Requests being handled now."""
        return len(self._tasks)

    @property
    def lost(self) -> bool:
        """True once a send failed: the peer is gone and later messages are dropped."""
        return self._lost

    async def submit(self, message: bytes | str) -> None:
        """Start handling one message; waits while `max_in_flight` requests are running."""
        await self._slots.acquire()
        task = asyncio.create_task(self._handle(message))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    async def notify(self, method: str, params: dict[str, Any] | list[Any] | None = None) -> None:
        """Send a notification (params left out when None); never mid-way through another."""
        await self.send(notification(method, params))

    async def send(self, data: bytes) -> None:
        """Send one encoded message; dropped (not raised) once the peer is lost."""
        async with self._write_lock:
            if self._lost:
                return
            try:
                await self._send(data)
            except Exception as exc:  # broken pipe, closed transport, socket disconnected
                self._lose(exc)

    async def drain(self) -> None:
        """Wait until every request submitted so far (and any started meanwhile) is finished."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def cancel(self) -> None:
        """Cancel every request in flight (their responses are never sent)."""
        for task in self._tasks:
            task.cancel()

    async def _handle(self, message: bytes | str) -> None:
        try:
            response = await self._dispatcher.handle(message)
        except Exception:  # Dispatcher.handle does not raise; this is the last line of defence
            self._log.exception("rpc: a message could not be handled")
            return
        if response is not None:
            await self.send(response)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    def _lose(self, exc: Exception) -> None:
        self._lost = True
        self._log.warning("rpc: sending failed (%r); closing the connection", exc)
        if self._on_lost is not None:
            self._on_lost()
