"""Connection: one peer's requests in flight and the server's messages to it, without framing.

A transport (NDJSON lines, WebSocket frames) hands each incoming message to `submit` and gives
the connection a `send` coroutine for one outgoing message. What every transport needs is
here once:

- each request whose handler waits runs in its own task, so a slow handler never delays a fast
  one and responses go out in the order they are ready; what needs no waiting (an error found
  before any handler runs, a `sync=True` method) is answered at once, without a task;
- at most `max_in_flight` requests run at once: `submit` waits for a free slot, which stops the
  transport from reading more (backpressure instead of unbounded memory); a transport that
  answers on its own turn checks `has_slot` and calls `start` instead;
- every outgoing message, response or notification, goes through one lock, so messages never
  interleave, and a failed send (the peer is gone) closes the connection instead of raising
  in whichever task happened to write.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ralph.rpc.dispatcher import Dispatcher, Pending
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
        self._max_in_flight = max_in_flight
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._reserved = 0  # slots handed to woken waiters that have not resumed yet
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

    @property
    def has_slot(self) -> bool:
        """True when a request may start now (fewer than `max_in_flight` in flight)."""
        return (len(self._tasks) + self._reserved < self._max_in_flight
                and not self._slot_waiters)

    async def wait_for_slot(self) -> None:
        """Return once a request may start (at once when one may already); first come, first
        served."""
        if self.has_slot:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # woken, then cancelled: pass it on
                self._reserved -= 1
                self._wake_waiters()
            elif waiter in self._slot_waiters:
                self._slot_waiters.remove(waiter)
            raise
        self._reserved -= 1  # the slot kept for this waiter is now the caller's

    async def submit(self, message: bytes | str) -> None:
        """Handle one message; waits while `max_in_flight` requests are running.

        An answer that needs no waiting is sent before this returns; a handler that waits
        runs in its own task, which sends its answer when it is ready.
        """
        await self.wait_for_slot()
        answer = self.start(message)
        if answer is not None:
            await self.send(answer)

    def start(self, message: bytes | str) -> bytes | None:
        """Dispatch one message on the caller's turn: the answer to send if it is ready now;
        None when there is none, or when the handler waits and was started in a task of its
        own (which sends the answer itself). Call it only when `has_slot` (or after
        `wait_for_slot`): the bound on requests in flight is the caller's to keep.
        """
        answer = self._dispatcher.dispatch(message)
        if answer is None or isinstance(answer, bytes):
            return answer
        task = asyncio.create_task(self._handle(answer))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._finished, answer))
        return None

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
                self.mark_lost(exc)

    async def drain(self) -> None:
        """Wait until every request submitted so far (and any started meanwhile) is finished."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def cancel(self) -> None:
        """Cancel every request in flight (their responses are never sent)."""
        for task in self._tasks:
            task.cancel()

    async def _handle(self, pending: Pending) -> None:
        try:
            response = await pending
        except Exception:  # Dispatcher answers do not raise; this is the last line of defence
            self._log.exception("rpc: a message could not be handled")
            return
        if response is not None:
            await self.send(response)

    def _finished(self, pending: Pending, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never awaited its handler: closing the
        # coroutine here spares it the "never awaited" warning (a no-op once it has run).
        pending.close()
        self._tasks.discard(task)
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        """Hand free slots to waiters, in order; each slot stays kept until its waiter runs."""
        while self._slot_waiters and len(self._tasks) + self._reserved < self._max_in_flight:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._reserved += 1

    def mark_lost(self, exc: Exception) -> None:
        """The peer is gone (a write failed): later messages are dropped, `on_lost` is called."""
        if self._lost:
            return
        self._lost = True
        self._log.warning("rpc: sending failed (%r); closing the connection", exc)
        if self._on_lost is not None:
            self._on_lost()
