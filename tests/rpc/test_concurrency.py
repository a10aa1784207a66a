"""Requests run concurrently: a slow handler never delays a fast one; in flight is bounded."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ralph.rpc import Connection, Dispatcher, Registry

GUARD_S = 10.0
"""Only turns a deadlock into a failure; no test measures time."""


class Gate:
    """A registry whose `slow` waits for `release`, with `fast` and `open` beside it."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = 0
        self.started_event = asyncio.Event()
        self.cancelled = 0
        self.opened = asyncio.Event()
        registry = Registry(title="gate", version="0")

        @registry.method("slow")
        async def slow() -> str:
            self.started += 1
            self.started_event.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return "slow"

        @registry.method("fast")
        async def fast() -> str:
            return "fast"

        @registry.method("wait_open")
        async def wait_open() -> str:
            await self.opened.wait()
            return "waited"

        @registry.method("open")
        async def open_() -> str:
            self.opened.set()
            return "opened"

        self.dispatcher = Dispatcher(registry)


def _request(method: str, request_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "id": request_id}).encode()


class Collector:
    """A send callback that records what was sent and wakes waiters."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.changed = asyncio.Event()

    async def send(self, data: bytes) -> None:
        self.sent.append(json.loads(data))
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(GUARD_S):
            while len(self.sent) < count:
                self.changed.clear()
                await self.changed.wait()


async def test_dispatcher_answers_fast_while_slow_is_pending() -> None:
    gate = Gate()
    slow = asyncio.create_task(gate.dispatcher.handle(_request("slow", 1)))
    await gate.started_event.wait()
    fast = await gate.dispatcher.handle(_request("fast", 2))
    assert json.loads(fast or b"")["result"] == "fast"
    assert not slow.done()
    gate.release.set()
    assert json.loads(await slow or b"")["result"] == "slow"


async def test_connection_sends_responses_as_they_are_ready() -> None:
    gate = Gate()
    out = Collector()
    connection = Connection(gate.dispatcher, out.send)
    await connection.submit(_request("slow", 1))
    await connection.submit(_request("fast", 2))
    await out.wait_for(1)
    assert [message["id"] for message in out.sent] == [2]
    gate.release.set()
    await connection.drain()
    assert [message["id"] for message in out.sent] == [2, 1]
    assert connection.in_flight == 0


async def test_in_flight_requests_are_bounded() -> None:
    gate = Gate()
    out = Collector()
    connection = Connection(gate.dispatcher, out.send, max_in_flight=2)
    await connection.submit(_request("slow", 1))
    await connection.submit(_request("slow", 2))
    third = asyncio.create_task(connection.submit(_request("fast", 3)))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not third.done(), "a third request waits for a free slot"
    assert gate.started == 2
    assert out.sent == []
    gate.release.set()
    async with asyncio.timeout(GUARD_S):
        await third
    await connection.drain()
    assert sorted(message["id"] for message in out.sent) == [1, 2, 3]


async def test_batch_elements_run_concurrently() -> None:
    gate = Gate()
    batch = json.dumps(
        [
            {"jsonrpc": "2.0", "method": "wait_open", "id": 1},
            {"jsonrpc": "2.0", "method": "open", "id": 2},
        ]
    )
    async with asyncio.timeout(GUARD_S):
        response = json.loads(await gate.dispatcher.handle(batch) or b"")
    assert {item["id"]: item["result"] for item in response} == {1: "waited", 2: "opened"}


async def test_cancel_stops_handlers_without_answers() -> None:
    gate = Gate()
    out = Collector()
    connection = Connection(gate.dispatcher, out.send)
    await connection.submit(_request("slow", 1))
    await gate.started_event.wait()
    connection.cancel()
    await connection.drain()
    assert gate.cancelled == 1
    assert out.sent == []


async def test_a_failed_send_loses_the_peer_once() -> None:
    gate = Gate()
    lost: list[bool] = []
    attempts = 0

    async def broken(data: bytes) -> None:
        nonlocal attempts
        attempts += 1
        raise BrokenPipeError("gone")

    connection = Connection(gate.dispatcher, broken, on_lost=lambda: lost.append(True))
    await connection.submit(_request("fast", 1))
    await connection.drain()
    assert connection.lost
    await connection.notify("event", {"type": "x"})
    await connection.submit(_request("fast", 2))
    await connection.drain()
    assert attempts == 1, "nothing is sent after the peer is gone"
    assert lost == [True]


def test_max_in_flight_must_be_positive() -> None:
    async def send(data: bytes) -> None: ...

    dispatcher = Dispatcher(Registry(title="t", version="0"))
    with pytest.raises(ValueError, match="at least 1"):
        Connection(dispatcher, send, max_in_flight=0)
