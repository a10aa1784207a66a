"""The connected WebSocket clients of `ralph serve`: each one's messages answered by the
JSON-RPC dispatcher, concurrently (a bounded number in flight), at most MESSAGES_PER_MINUTE
(then -32000 "rate limited" with `data.retry_after`), and everything sent to it through a
bounded queue: a client that stops reading is disconnected once SEND_QUEUE messages wait
for it, never buffered without limit.

The hub publishes the events of every store frame to every client (ralph.remote.events),
and replays the ones a reconnecting client missed (`initialize`'s `since_seq`): a client
gets the live events of the frames after the hub's position when it joined, and a replay
covers the frames up to that position, so nothing comes twice and nothing is skipped. The
live events are held back while a replay runs (and until the client's first message has
been answered, at most HOLD_S): they then come after it, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ralph.remote import legacy
from ralph.remote.coalesce import MERGE_S, OutputMerger
from ralph.remote.events import Outgoing, Projector, Shape
from ralph.remote.limits import (
    ANSWER_QUEUE_CHARS,
    MAX_BATCH,
    SEND_QUEUE,
    SEND_QUEUE_CHARS,
    RateLimit,
)
from ralph.rpc import APPLICATION_ERROR, INVALID_REQUEST, Dispatcher, RpcError
from ralph.rpc.envelope import NULL_ID, encode_id, error_response
from ralph.rpc.jsoncodec import DecodeError, loads
from ralph.store import Frame, Store

log = logging.getLogger("ralph.remote")

IN_FLIGHT = 64  # requests of one client handled at once; more wait to be read
TOO_SLOW = 4008  # the close code of a client that stopped reading (application range)
HOLD_S = 1.0  # live events wait at most this long for a new client's first message
HOLD_LIMIT = 4 * SEND_QUEUE  # live events held back for one client (then: too slow)
_STOP = ""

# The client whose request is being answered (methods that act on their connection:
# initialize's catch-up, session/watch, the one big read at a time)
CURRENT: ContextVar[Client | None] = ContextVar("ralph_remote_client", default=None)
# Whether the request being answered holds its connection's big-read slot (a list shared
# by a batch's requests: a request appends to it)
HEAVY: ContextVar[list[bool]] = ContextVar("ralph_remote_heavy", default=[])  # noqa: B039


def rate_limited(raw: bytes | str, retry_after: float) -> bytes | None:
    """The answer to a message over the rate limit: -32000 with `data.retry_after` for a
    request (a batch with a request: one error, id null), nothing for notifications."""
    try:
        message = loads(raw)
    except DecodeError:
        message = None
    error = (APPLICATION_ERROR, "rate limited", {"retry_after": retry_after})
    if legacy.is_legacy(message):
        return legacy.error_message("RATE_LIMITED", "rate limited",
                                    message.get("request_id"),
                                    details={"retry_after": retry_after}).encode()
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
    """How many messages a message counts for: a batch, one per element."""
    head = raw.lstrip()[:1]
    if head not in ("[", b"["):
        return 1
    try:
        batch = loads(raw)
    except DecodeError:
        return 1
    return max(1, len(batch)) if type(batch) is list else 1


def legacy_command(raw: bytes | str) -> legacy.LegacyCommand | None:
    """The legacy command `raw` is, if it is one (ruled out cheaply for most JSON-RPC)."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    if '"command"' not in text:
        return None
    try:
        message = loads(raw)
    except DecodeError:
        return None
    return legacy.LegacyCommand(message) if legacy.is_legacy(message) else None


def take_big_read() -> None:
    """For a method that reads much (file/get, git/diff): one at a time per connection,
    until its answer is queued (a batch of them, or requests that do not wait for their
    answers, would otherwise hold as many large answers in memory at once)."""
    client = CURRENT.get()
    if client is None:
        return
    if client.heavy:
        raise RpcError(APPLICATION_ERROR, "busy: one file/get or git/diff at a time per "
                                          "connection (wait for the last one's answer)",
                       {"retry": True})
    client.heavy = True
    HEAVY.get().append(True)


class Client:
    """One WebSocket connection."""

    def __init__(self, websocket: WebSocket, dispatcher: Dispatcher, *,
                 joined_at: int = 0) -> None:
        self.websocket = websocket
        self.dispatcher = dispatcher
        self.rate = RateLimit()
        # text, as sent: an event to every client is encoded once per shape, not per client
        # (text, is an answer): events are bounded by SEND_QUEUE_CHARS (a client that lets
        # them pile up is dropped), answers by ANSWER_QUEUE_CHARS (the next one waits)
        self._outbox: asyncio.Queue[tuple[str, bool]] = asyncio.Queue(maxsize=SEND_QUEUE)
        self._queued_chars = 0  # of the events in _outbox
        self._answer_chars = 0  # of the answers in _outbox
        self._sent = asyncio.Event()  # something left the queue
        self.replaying = asyncio.Lock()  # one replay at a time (catch-up, session/watch)
        self.heavy = False  # a file/get or git/diff of this connection is under way
        self._slots = asyncio.Semaphore(IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sender: asyncio.Task[None] | None = None
        self._ended = asyncio.Event()  # no more reading: the connection is to end
        self._close: tuple[int, str] | None = None  # how the server ends it
        self.dropped = False
        # the events' shape, fixed by its first message (JSON-RPC until then)
        self.shape: Shape | None = None
        self.joined_at = joined_at  # the hub's position when it joined: later frames, live
        self.history_from = joined_at  # it has (or is sent) every event after this seq
        self._holds = 1  # until its first message is answered (or HOLD_S)
        self._held: deque[Outgoing | str] = deque()  # events (and _STOP) held back
        self._flushing: asyncio.Task[None] | None = None
        self._first_answered = False
        self._warned_legacy = False
        self.watching: str | None = None  # its watched session (session/watch)
        self.watch_task: asyncio.Task[None] | None = None

    @property
    def event_shape(self) -> Shape:
        return self.shape or "jsonrpc"

    def offer(self, data: bytes | str) -> bool:
        """Queue `data` for the client; False (and the client dropped) if its queue is full."""
        if self.dropped:
            return False
        text = data if isinstance(data, str) else data.decode()
        try:
            if self._queued_chars + len(text) > SEND_QUEUE_CHARS and self._queued_chars:
                raise asyncio.QueueFull
            self._put_nowait(text, False)
        except asyncio.QueueFull:
            log.warning("remote: a client stopped reading (%d messages, %d characters "
                        "waiting): dropped", self._outbox.qsize(), self._queued_chars)
            self.close(TOO_SLOW, "too slow: messages were not read", drop=True)
            return False
        return True

    def deliver(self, event: Outgoing) -> None:
        """A live event: sent, or held back while the client is being caught up."""
        if self.dropped:
            return
        if self._holds or self._held or self._flushing is not None:
            if len(self._held) >= HOLD_LIMIT:
                self.close(TOO_SLOW, "too slow: messages were not read", drop=True)
                return
            self._held.append(event)
            return
        self.offer(event.text(self.event_shape))

    def hold(self) -> None:
        """Hold live events back (a replay is about to be sent)."""
        self._holds += 1

    def release(self) -> None:
        """The end of a hold: what was held back goes out, in order."""
        self._holds = max(0, self._holds - 1)
        if not self._holds:
            self._flush_held()

    def _flush_held(self) -> None:
        """What was held back, into the queue: at once if there is room, else at the
        client's pace (the live events meanwhile held back behind it)."""
        if self._flushing is not None or not self._held:
            return
        if len(self._held) <= SEND_QUEUE - self._outbox.qsize():
            shape = self.event_shape
            while self._held:
                item = self._held.popleft()
                self._put_nowait(item if isinstance(item, str) else item.text(shape), False)
            return
        self._flushing = asyncio.get_running_loop().create_task(self._flush_slowly())

    async def _flush_slowly(self) -> None:
        try:
            shape = self.event_shape
            while self._held:
                item = self._held[0]  # (taken once queued: what comes meanwhile waits behind)
                await self._put(item if isinstance(item, str) else item.text(shape))
                if self._held and self._held[0] is item:
                    self._held.popleft()
        finally:
            self._flushing = None
        self._flush_held()  # (what came while the last one was being queued)

    async def replay(self, events: Iterable[Outgoing]) -> int:
        """Send `events` in order, waiting for room in the queue (a replay may be long; it
        goes at the client's pace); how many were sent."""
        sent = 0
        shape = self.event_shape
        for event in events:
            if self.dropped:
                break
            await self._put(event.text(shape))
            sent += 1
        return sent

    def close(self, code: int, reason: str, *, drop: bool = False) -> None:
        """End the connection with `code`: after what is queued, or at once if `drop` (a
        client that does not read: what waits for it is thrown away, and a send stuck on
        it given up)."""
        if self._close is not None:
            return
        self._close = (code, reason)
        self.dropped = True
        if drop:
            self._held.clear()
            if self._flushing is not None:
                self._flushing.cancel()
            while not self._outbox.empty():
                self._outbox.get_nowait()
            self._queued_chars = self._answer_chars = 0
            self._sent.set()
            if self._sender is not None:
                self._sender.cancel()
            self._ended.set()
        elif self._held or self._holds:  # what was held back is due before the end
            self._held.append(_STOP)
            self._holds = 0
            self._flush_held()
        else:
            if self._outbox.full():
                self._forget(*self._outbox.get_nowait())
            self._put_nowait(_STOP, False)

    def _put_nowait(self, text: str, answer: bool) -> None:
        self._outbox.put_nowait((text, answer))
        if answer:
            self._answer_chars += len(text)
        else:
            self._queued_chars += len(text)

    async def _put(self, text: str, answer: bool = False) -> None:
        await self._outbox.put((text, answer))
        if answer:
            self._answer_chars += len(text)
        else:
            self._queued_chars += len(text)

    def _forget(self, text: str, answer: bool) -> None:
        """`text` left the queue."""
        if answer:
            self._answer_chars -= len(text)
        else:
            self._queued_chars -= len(text)
        self._sent.set()

    async def answer(self, data: bytes | str) -> None:
        """Queue an answer: never dropped (answers are bounded by the requests in flight),
        but it waits while ANSWER_QUEUE_CHARS of answers wait to be sent already."""
        if self.dropped:
            return
        text = data if isinstance(data, str) else data.decode()
        while self._answer_chars and self._answer_chars + len(text) > ANSWER_QUEUE_CHARS:
            self._sent.clear()
            await self._sent.wait()
            if self.dropped:
                return
        await self._put(text, True)

    async def serve(self) -> None:
        """Read and answer messages until the client goes, or the server ends it."""
        loop = asyncio.get_running_loop()
        self._sender = loop.create_task(self._send_all())
        ended = loop.create_task(self._ended.wait())
        hold_timer = loop.call_later(HOLD_S, self._first_done)
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
            hold_timer.cancel()
            ended.cancel()
            for helper in (self.watch_task, self._flushing):
                if helper is not None:
                    helper.cancel()
            for task in list(self._tasks):
                task.cancel()
            if self._close is not None and not self._sender.done():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(self._sender), 5)
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sender
            await self._say_goodbye()

    def _first_done(self) -> None:
        if not self._first_answered:
            self._first_answered = True
            self.release()

    async def _take(self, raw: bytes | str) -> None:
        command = legacy_command(raw)
        if self.shape is None:
            self.shape = "legacy" if command is not None else "jsonrpc"
        count = weight(raw)
        if count > MAX_BATCH:
            self.offer(error_response(NULL_ID, INVALID_REQUEST, "Invalid Request", {
                "reason": f"a batch of {count} requests: at most {MAX_BATCH} in one"}))
            self._first_done()
            return
        wait = self.rate.allow(count=count)
        if wait is not None:
            answer = rate_limited(raw, wait)
            if answer is not None:
                self.offer(answer)
            self._first_done()
            return
        await self._slots.acquire()
        task = asyncio.get_running_loop().create_task(self._answer(raw, command))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, raw: bytes | str, command: legacy.LegacyCommand | None) -> None:
        CURRENT.set(self)  # (this task's own context)
        HEAVY.set([])
        try:
            if command is not None:
                await self._answer_legacy(command)
            else:
                answer = await self.dispatcher.handle(raw)
                if answer is not None:
                    await self.answer(answer)
        finally:
            if HEAVY.get():  # this request's file/get or git/diff is answered (queued)
                self.heavy = False
            self._slots.release()
            self._first_done()

    async def _answer_legacy(self, command: legacy.LegacyCommand) -> None:
        if not self._warned_legacy:
            self._warned_legacy = True
            await self.answer(legacy.deprecation_warning(command.command))
        request = command.request()
        if request is None:
            await self.answer(command.unknown())
            return
        answer = command.reply(await self.dispatcher.handle(request))
        if answer is not None:
            await self.answer(answer)

    async def _send_all(self) -> None:
        while True:
            data, answer = await self._outbox.get()
            self._forget(data, answer)
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
    """The connected clients; every store frame's events to all of them (`publish`, in seq
    order, from one subscription), a replay of the missed ones to one (`catch_up`)."""

    def __init__(self, store: Store | None = None, project: Projector | None = None,
                 cursor: int = 0) -> None:
        self.clients: set[Client] = set()
        self.store = store
        self.project = project
        self.cursor = cursor  # every frame up to this one published
        self._seen = cursor
        self._merger = OutputMerger()
        self._flush_timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self.clients)

    def join(self, websocket: WebSocket, dispatcher: Dispatcher) -> Client:
        client = Client(websocket, dispatcher, joined_at=self.cursor)
        self.clients.add(client)
        return client

    def close_all(self, code: int, reason: str) -> None:
        for client in list(self.clients):
            client.close(code, reason)

    def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None:
        """An event that no frame stands for (the heartbeat)."""
        self._deliver(Outgoing(method, params or {}))

    def publish(self, frame: Frame) -> None:
        """The events of `frame` to every client (the frames come in seq order); streamed
        agent output merged (ralph.remote.coalesce)."""
        now = time.monotonic()
        for method, params in self.events_of(frame):
            for seq, name, merged in self._merger.add(frame.seq, method, params, now):
                self._deliver(Outgoing(name, merged, seq))
        self._seen = frame.seq
        self._advance()
        if self._merger.held is not None and self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(MERGE_S, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        if self._merger.held is not None:
            seq, name, merged = self._merger.take()
            self._deliver(Outgoing(name, merged, seq))
            self._advance()

    def _advance(self) -> None:
        # What is held has not been sent: a client that joins now gets it live, so the
        # position it joins at (what a replay covers) stays before it.
        held = self._merger.held is not None
        self.cursor = max(self.cursor, self._merger.first_seq - 1 if held else self._seen)

    def events_of(self, frame: Frame) -> list[tuple[str, dict[str, Any]]]:
        if self.project is None:
            return []
        try:
            return self.project(frame)
        except Exception as exc:
            # anyone may append to the store (and a prompt's content may be gone): an odd
            # frame is skipped, never the events after it
            log.warning("remote: frame %s (%s) cannot be an event: %s", frame.seq,
                        frame.topic, exc)
            return []

    def _deliver(self, event: Outgoing) -> None:
        for client in list(self.clients):
            client.deliver(event)

    async def catch_up(self, client: Client, since_seq: int) -> int:
        """Replay to `client` the events of the frames after `since_seq` it missed (those
        up to its joining: it gets the later ones live); how many were sent."""
        if self.store is None or self.project is None:
            return 0
        async with client.replaying:  # (two at once would send the same events twice)
            until = client.history_from
            if since_seq >= until:
                return 0
            client.hold()
            try:
                sent = await client.replay(self.events_between(since_seq, until))
                client.history_from = since_seq
                return sent
            finally:
                client.release()

    def events_between(self, after_seq: int, until_seq: int, *, stream: str | None = None,
                       mark: dict[str, Any] | None = None) -> Iterable[Outgoing]:
        """The events of the frames in (after_seq, until_seq] (of `stream` only, if given),
        each with `mark` added to its params, read from the store as they are sent."""
        assert self.store is not None and self.project is not None
        for frame in self.store.read(stream=stream, after_seq=after_seq):
            if frame.seq > until_seq:
                return
            for method, params in self.events_of(frame):
                yield Outgoing(method, {**params, **mark} if mark else params, frame.seq)
