"""A client of `ralph serve` that stops reading is dropped once SEND_QUEUE messages wait for
it (never buffered without limit), while the others go on; the rate limit's window."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.websockets import WebSocketState

from ralph.remote.clients import HOLD_S, TOO_SLOW, Client, Hub, rate_limited
from ralph.remote.coalesce import MERGE_S, OUTPUT, OutputMerger
from ralph.remote.events import Outgoing, projector
from ralph.remote.limits import SEND_QUEUE, RateLimit
from ralph.rpc import Dispatcher, Registry
from ralph.store import Store


class StuckSocket:
    """A WebSocket whose peer never reads: the first send blocks for ever."""

    def __init__(self, stuck: bool) -> None:
        self.stuck = stuck
        self.sent: list[str] = []
        self.closed: tuple[int, str] | None = None
        self.client_state = WebSocketState.CONNECTED
        self._gone = asyncio.Event()

    async def send_text(self, text: str) -> None:
        if self.stuck:
            await asyncio.Event().wait()
        self.sent.append(text)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self._gone.set()

    async def receive(self) -> dict[str, Any]:
        await self._gone.wait()
        return {"type": "websocket.disconnect"}


def test_a_client_that_stops_reading_is_dropped_and_the_others_go_on() -> None:
    async def go() -> tuple[Client, StuckSocket, StuckSocket]:
        dispatcher = Dispatcher(Registry(title="t", version="1"))
        hub = Hub()
        slow_socket, good_socket = StuckSocket(True), StuckSocket(False)
        slow = Client(slow_socket, dispatcher)  # type: ignore[arg-type]
        good = Client(good_socket, dispatcher)  # type: ignore[arg-type]
        hub.clients |= {slow, good}
        tasks = [asyncio.ensure_future(c.serve()) for c in (slow, good)]
        await asyncio.sleep(HOLD_S + 0.2)  # neither says anything: events flow after HOLD_S
        for n in range(SEND_QUEUE + 10):
            hub.broadcast("event/agent_output", {"n": n})
            await asyncio.sleep(0)
        await asyncio.wait_for(tasks[0], 5)  # the slow one ends by itself
        good.close(1001, "done")
        await asyncio.wait_for(tasks[1], 5)
        return slow, slow_socket, good_socket

    slow, slow_socket, good_socket = asyncio.run(go())
    assert slow.dropped and not slow.offer(b"more")
    assert slow_socket.closed == (TOO_SLOW, "too slow: messages were not read")
    assert len(good_socket.sent) == SEND_QUEUE + 10  # every message, in order
    assert good_socket.sent[-1].endswith('"params":{"n":1033}}')
    assert good_socket.closed == (1001, "done")


def test_the_rate_limit_is_a_sliding_window() -> None:
    rate = RateLimit(limit=3, window_s=60)
    assert [rate.allow(t) for t in (0, 1, 2)] == [None, None, None]
    assert rate.allow(3) == 57
    assert rate.allow(60.5) is None  # the first one left the window


def test_over_the_limit_a_request_gets_an_error_and_a_notification_nothing() -> None:
    assert rate_limited('{"jsonrpc":"2.0","id":7,"method":"x"}', 1.5) == (
        b'{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"rate limited",'
        b'"data":{"retry_after":1.5}}}')
    assert rate_limited('{"jsonrpc":"2.0","method":"x"}', 1.5) is None
    assert b'"id":null' in (rate_limited("[1,2]", 2) or b"")
    assert TOO_SLOW == 4008


def test_streamed_output_that_comes_at_once_is_merged_into_one_event() -> None:
    merger = OutputMerger()

    def out(seq: int, content: str, kind: str = "text", **extra: Any) -> dict[str, Any]:
        return {"session_id": "s", "seq": seq, "type": kind, "content": content,
                "chars": len(content), **extra}

    assert merger.add(1, OUTPUT, out(1, "Hel"), now=0.0) == []
    assert merger.add(2, OUTPUT, out(2, "lo", delta=True), now=0.005) == []
    assert merger.add(3, OUTPUT, out(3, "next line"), now=0.01) == []
    assert not merger.due(0.015) and merger.due(0.0 + MERGE_S)
    [(seq, method, params)] = merger.add(4, OUTPUT, out(4, "ls", "tool_use"), now=0.012)[:1]
    assert (seq, method) == (3, OUTPUT)
    assert params == {"session_id": "s", "seq": 3, "type": "text",
                      "content": "Hello\nnext line", "chars": 15, "pieces": 3}
    # a tool call is never merged: it went out right behind
    assert merger.held is None
    assert merger.add(5, OUTPUT, out(5, "a"), now=1.0) == []
    late = merger.add(6, OUTPUT, out(6, "b"), now=1.0 + MERGE_S)  # the window is over
    assert [p["content"] for _, _, p in late] == ["a"] and merger.held is not None
    assert merger.take()[2]["content"] == "b"


def test_a_client_joining_while_output_is_held_gets_it_live_and_no_replay_twice(
        store: Store) -> None:
    stream = "sessions/ses_x"
    for n in range(3):
        store.append("agent.output", {"kind": "text", "content": f"line {n}"}, stream=stream)
    frames = list(store.read())

    async def go() -> tuple[list[str], list[str], int]:
        hub = Hub(store, projector(lambda _hash: ""), cursor=0)
        hub.publish(frames[0])
        hub.publish(frames[1])  # held, merged with the first
        assert hub.cursor == 0  # nothing sent yet
        socket = StuckSocket(False)
        client = hub.join(socket, Dispatcher(Registry(title="t", version="1")))  # type: ignore[arg-type]
        assert client.joined_at == 0
        task = asyncio.ensure_future(client.serve())
        replayed = await hub.catch_up(client, 0)  # nothing before its joining
        await asyncio.sleep(MERGE_S * 3)  # the held output goes out
        hub.publish(frames[2])
        await asyncio.sleep(MERGE_S * 3)
        client.close(1000, "bye")
        await asyncio.wait_for(task, 5)
        return socket.sent, [str(hub.cursor)], replayed

    sent, cursor, replayed = asyncio.run(go())
    contents = [json.loads(m)["params"]["content"] for m in sent]
    assert replayed == 0 and contents == ["line 0\nline 1", "line 2"]
    assert cursor == [str(frames[2].seq)]


def test_events_held_back_go_out_in_order_even_while_more_come() -> None:
    async def go() -> list[int]:
        socket = StuckSocket(False)
        client = Client(socket, Dispatcher(Registry(title="t", version="1")))  # type: ignore[arg-type]
        task = asyncio.ensure_future(client.serve())
        await asyncio.sleep(0)
        for n in range(SEND_QUEUE + 100):  # held (no first message yet): more than fits
            client.deliver(Outgoing("event/x", {"n": n}))
        client.release()  # (as the first message's answer would): flushed at its pace
        for n in range(SEND_QUEUE + 100, SEND_QUEUE + 300):  # ... while these come
            client.deliver(Outgoing("event/x", {"n": n}))
            await asyncio.sleep(0)
        while len(socket.sent) < SEND_QUEUE + 300:
            await asyncio.sleep(0.01)
        client.close(1000, "bye")
        await asyncio.wait_for(task, 5)
        return [json.loads(m)["params"]["n"] for m in socket.sent]

    assert asyncio.run(go()) == list(range(SEND_QUEUE + 300))
