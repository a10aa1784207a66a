"""The connected WebSocket clients of `ralph serve`: each one's messages answered by the
JSON-RPC dispatcher, concurrently (a bounded number in flight), at most MESSAGES_PER_MINUTE
(then -32000 "rate limited" with `data.retry_after`), and everything sent to it through a
bounded queue: a client that stops reading is disconnected once SEND_QUEUE messages wait
for it, never buffered without limit. The hub sends notifications to every client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ralph.remote.limits import SEND_QUEUE, RateLimit
from ralph.rpc import APPLICATION_ERROR, Dispatcher
from ralph.rpc.envelope import NULL_ID, encode_id, error_response, notification
from ralph.rpc.jsoncodec import DecodeError, loads

log = logging.getLogger("ralph.remote")

IN_FLIGHT = 64  # requests of one client handled at once; more wait to be read
TOO_SLOW = 4008  # the close code of a client that stopped reading (application range)
_STOP = ""


def rate_limited(raw: bytes | str, retry_after: float) -> bytes | None:
    """The answer to a message over the rate limit: -32000 with `data.retry_after` for a
    request (a batch with a request: one error, id null), nothing for notifications."""
    try:
        message = loads(raw)
    except DecodeError:
        message = None
    error = (APPLICATION_ERROR, "rate limited", {"retry_after": retry_after})
    if type(message) is dict:
        if "id" not in message:
            return None
        request_id = message["id"]
        valid = request_id is None or type(request_id) in (str, int, float)
        return error_response(encode_id(request_id) if valid else NULL_ID, *error)
    if type(message) is list and message and all(
            type(m) is dict and "id" not in m for m in message):
        return None
    return error_response(NULL_ID, *error)


def weight(raw: bytes | str) -> int:
    """How many messages a message counts for: a batch, one per element (cheaply: the
    commas at its top level are not counted, only its objects' openings)."""
    head = raw.lstrip()[:1]
    if head not in ("[", b"["):
        return 1
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    return max(1, text.count('"jsonrpc"'))


class Client:
    """One WebSocket connection."""

    def __init__(self, websocket: WebSocket, dispatcher: Dispatcher) -> None:
        self.websocket = websocket
        self.dispatcher = dispatcher
        self.rate = RateLimit()
        # text, as sent: a notification to every client is decoded once, not per client
        self._outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=SEND_QUEUE)
        self._slots = asyncio.Semaphore(IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sender: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()  # no more reading: the connection is to end
        self._close: tuple[int, str] | None = None  # how the server ends it
        self.dropped = False

    def offer(self, data: bytes | str) -> bool:
        """Queue `data` for the client; False (and the client dropped) if its queue is full."""
        if self.dropped:
            return False
        try:
            self._outbox.put_nowait(data if isinstance(data, str) else data.decode())
        except asyncio.QueueFull:
            log.warning("remote: a client stopped reading (%d messages waiting): dropped",
                        SEND_QUEUE)
            self.close(TOO_SLOW, "too slow: messages were not read", drop=True)
            return False
        return True

    def close(self, code: int, reason: str, *, drop: bool = False) -> None:
        """End the connection with `code`: after what is queued, or at once if `drop` (a
        client that does not read: what waits for it is thrown away, and a send stuck on
        it given up)."""
        if self._close is not None:
            return
        self._close = (code, reason)
        self.dropped = True
        if drop:
            while not self._outbox.empty():
                self._outbox.get_nowait()
            if self._sender is not None:
                self._sender.cancel()
            self._ended.set()
        else:
            if self._outbox.full():
                self._outbox.get_nowait()
            self._outbox.put_nowait(_STOP)

    async def serve(self) -> None:
        """Read and answer messages until the client goes, or the server ends it."""
        loop = asyncio.get_running_loop()
        self._sender = loop.create_task(self._send_all())
        ended = loop.create_task(self._ended.wait())
        try:
            while True:
                receiving = loop.create_task(self.websocket.receive())
                await asyncio.wait({receiving, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not receiving.done():
                    receiving.cancel()
                    break
                message = receiving.result()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message["text"] if message.get("text") is not None else \
                    message.get("bytes")
                if raw is not None:
                    await self._take(raw)
        except WebSocketDisconnect:
            pass
        finally:
            ended.cancel()
            for task in list(self._tasks):
                task.cancel()
            if self._close is not None and not self._sender.done():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(self._sender), 5)
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sender
            await self._say_goodbye()

    async def _take(self, raw: bytes | str) -> None:
        wait = self.rate.allow(count=weight(raw))
        if wait is not None:
            answer = rate_limited(raw, wait)
            if answer is not None:
                self.offer(answer)
            return
        await self._slots.acquire()
        task = asyncio.get_running_loop().create_task(self._answer(raw))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, raw: bytes | str) -> None:
        try:
            answer = await self.dispatcher.handle(raw)
            if answer is not None:
                self.offer(answer)
        finally:
            self._slots.release()

    async def _send_all(self) -> None:
        while True:
            data = await self._outbox.get()
            if data == _STOP:
                self._ended.set()
                return
            try:
                await self.websocket.send_text(data)
            except (WebSocketDisconnect, RuntimeError, OSError):
                self._ended.set()
                return

    async def _say_goodbye(self) -> None:
        """The close frame, if the server ends the connection (bounded: the client may not
        read it; the connection ends when this handler returns anyway)."""
        if self._close is None or self.websocket.client_state != WebSocketState.CONNECTED:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.websocket.close(*self._close), 2)


class Hub:
    """The connected clients; notifications to all of them."""

    def __init__(self) -> None:
        self.clients: set[Client] = set()

    def __len__(self) -> int:
        return len(self.clients)

    def close_all(self, code: int, reason: str) -> None:
        for client in list(self.clients):
            client.close(code, reason)

    def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None:
        data = notification(method, params).decode()
        for client in list(self.clients):
            client.offer(data)
