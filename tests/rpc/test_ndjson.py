"""NdjsonServer over real pipes: framing, concurrency of writers, big lines, EOF and close."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from typing import Any

import pytest
from pydantic import BaseModel

from ralph.rpc import Dispatcher, NdjsonServer, Registry, fd_streams
from tests.rpc.pipes import GUARD_S, LineReader, wire


class Data(BaseModel):
    data: str


class Burst(BaseModel):
    count: int
    size: int


class Api:
    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.slow_cancelled = False
        self.server: NdjsonServer | None = None
        registry = Registry(title="ndjson", version="0")

        @registry.method("ping")
        async def ping() -> dict[str, bool]:
            return {"ok": True}

        @registry.method("digest", params=Data)
        async def digest(params: Data) -> dict[str, Any]:
            encoded = params.data.encode()
            return {"size": len(encoded), "sha256": hashlib.sha256(encoded).hexdigest()}

        @registry.method("echo", params=Data, positional=("data",))
        async def echo(params: Data) -> str:
            return params.data

        @registry.method("slow")
        async def slow() -> str:
            self.slow_started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.slow_cancelled = True
                raise
            return "done"

        @registry.method("burst", params=Burst)
        async def burst(params: Burst) -> int:
            assert self.server is not None
            server = self.server
            payload = "n" * params.size
            await asyncio.gather(
                *(
                    server.notify("event", {"type": "burst", "index": index, "payload": payload})
                    for index in range(params.count)
                )
            )
            return params.count

        self.dispatcher = Dispatcher(registry)

    def serve_on(self, reader: asyncio.StreamReader, writer: Any, **options: int) -> NdjsonServer:
        self.server = NdjsonServer(self.dispatcher, reader, writer, **options)
        return self.server


def _request(method: str, request_id: int, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params is not None:
        message["params"] = params
    return message


async def test_lines_in_lines_out_blank_lines_and_crlf_skipped() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        crlf = json.dumps(_request("ping", 2)).encode() + b"\r"
        pipes.send(_request("ping", 1), b"", b"   ", crlf)
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)
        pipes.end_output()
        messages = await pipes.client.rest()
    assert sorted(message["id"] for message in messages) == [1, 2]
    assert all(message["result"] == {"ok": True} for message in messages)


async def test_many_concurrent_writers_never_corrupt_a_line() -> None:
    """Notifications and responses of 100 KB (beyond the pipe's buffer) from many tasks."""
    api = Api()
    requests = 60
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        reading = asyncio.create_task(pipes.client.rest())
        big = "r" * 100_000
        for index in range(requests):
            pipes.send(_request("echo", index, [big]))
            if index % 10 == 0:
                pipes.send(_request("burst", 1000 + index, {"count": 20, "size": 100_000}))
        outside = [
            asyncio.create_task(server.notify("event", {"type": "outside", "n": n, "p": big}))
            for n in range(30)
        ]
        pipes.end_input()
        await asyncio.wait_for(asyncio.gather(serving, *outside), GUARD_S)
        pipes.end_output()
        messages = await reading
    responses = [message for message in messages if "id" in message]
    events = [message for message in messages if message.get("method") == "event"]
    assert len(responses) + len(events) == len(messages)
    assert sorted(response["id"] for response in responses) == sorted(
        [*range(requests), *(1000 + index for index in range(0, requests, 10))]
    )
    assert all(r["result"] == big for r in responses if r["id"] < 1000)
    assert all(r["result"] == 20 for r in responses if r["id"] >= 1000)
    assert len(events) == 6 * 20 + 30
    assert all(len(event["params"].get("payload", event["params"].get("p"))) == 100_000
               for event in events)


async def test_a_20_mb_line_in_and_out() -> None:
    api = Api()
    data = "é" * (10 * 1024 * 1024)  # 20 MiB of UTF-8
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        pipes.send(_request("digest", 1, {"data": data}), _request("echo", 2, [data]))
        first = await pipes.client.message()
        second = await pipes.client.message()
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)
    by_id = {first["id"]: first, second["id"]: second}
    assert by_id[1]["result"] == {
        "size": 20 * 1024 * 1024,
        "sha256": hashlib.sha256(data.encode()).hexdigest(),
    }
    assert by_id[2]["result"] == data


async def test_a_non_utf8_line_is_a_parse_error_and_serving_goes_on() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        pipes.send(b'{"jsonrpc":"2.0","method":"ping","id":"\xff\xfe"}')
        first = await pipes.client.message()
        pipes.send(_request("ping", 2))
        second = await pipes.client.message()
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)
    assert first == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32700,
            "message": "Parse error",
            "data": {"reason": "the input is not valid UTF-8"},
        },
    }
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {"ok": True}}


async def test_eof_returns_after_pending_responses_are_written() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        pipes.send(_request("slow", 1))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        pipes.end_input()
        await asyncio.wait_for(server.at_eof.wait(), GUARD_S)
        assert not serving.done(), "serve() waits for the request in flight"
        api.release.set()
        await asyncio.wait_for(serving, GUARD_S)
        await server.notify("event", {"type": "bridge_stopped"})  # the owner may still send
        pipes.end_output()
        messages = await pipes.client.rest()
    assert messages == [
        {"jsonrpc": "2.0", "id": 1, "result": "done"},
        {"jsonrpc": "2.0", "method": "event", "params": {"type": "bridge_stopped"}},
    ]


async def test_close_cancels_handlers_and_returns() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        pipes.send(_request("slow", 1))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        server.close()
        await asyncio.wait_for(serving, GUARD_S)
        assert api.slow_cancelled
        pipes.end_output()
        assert await pipes.client.rest() == []


async def test_cancelling_serve_closes_the_server() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        pipes.send(_request("slow", 1))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        await asyncio.wait_for(server.connection.drain(), GUARD_S)
        assert api.slow_cancelled


async def test_lines_over_the_limit_are_refused_and_serving_goes_on() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer, max_line_bytes=1000)
        serving = asyncio.create_task(server.serve())
        pipes.send(_request("echo", 1, ["x" * 5000]), _request("ping", 2))
        pipes.client_writer.write(b'{"jsonrpc":"2.0","method":"ping","pad":"' + b"y" * 600_000)
        pipes.end_input()  # the last, oversized line has no newline
        await asyncio.wait_for(serving, GUARD_S)
        pipes.end_output()
        messages = await pipes.client.rest()
    too_long = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Invalid Request",
            "data": {"reason": "the line is longer than 1000 bytes"},
        },
    }
    assert messages == [too_long, {"jsonrpc": "2.0", "id": 2, "result": {"ok": True}}, too_long]


async def test_a_last_line_without_newline_is_answered() -> None:
    api = Api()
    async with wire() as pipes:
        server = api.serve_on(pipes.server_reader, pipes.server_writer)
        serving = asyncio.create_task(server.serve())
        pipes.client_writer.write(json.dumps(_request("ping", 9)).encode())
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)
        pipes.end_output()
        assert await pipes.client.rest() == [{"jsonrpc": "2.0", "id": 9, "result": {"ok": True}}]


async def test_a_gone_peer_ends_serving() -> None:
    """The client closes the server's output: the failed write closes the server."""
    api = Api()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    server_reader, server_writer = await fd_streams(in_r, out_w)
    _, client_writer = await fd_streams(os.open(os.devnull, os.O_RDONLY), in_w)
    os.close(out_r)
    server = api.serve_on(server_reader, server_writer)
    serving = asyncio.create_task(server.serve())
    for index in range(3):
        client_writer.write(json.dumps(_request("ping", index)).encode() + b"\n")
    await asyncio.wait_for(serving, GUARD_S)
    assert server.connection.lost
    await server.notify("event", {"type": "dropped"})  # dropped, not raised
    client_writer.close()
    server_writer.close()
    await asyncio.wait_for(server_reader.read(), GUARD_S)


class Collected:
    """A plain synchronous writer (write + flush), as a binary file would be."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.flushes = 0

    def write(self, data: bytes, /) -> int:
        self.data += data
        return len(data)

    def flush(self) -> None:
        self.flushes += 1


async def test_a_plain_writer_and_a_fed_reader() -> None:
    api = Api()
    reader = asyncio.StreamReader()
    out = Collected()
    server = api.serve_on(reader, out)
    reader.feed_data(b'{"jsonrpc":"2.0","method":"ping","id":1}\n[]\n')
    reader.feed_eof()
    await asyncio.wait_for(server.serve(), GUARD_S)
    lines = bytes(out.data).split(b"\n")
    assert lines[-1] == b""
    parsed = [json.loads(line) for line in lines[:-1]]
    assert {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}} in parsed
    assert any(message.get("error", {}).get("code") == -32600 for message in parsed)
    assert out.flushes == 2


async def test_serve_runs_once() -> None:
    reader = asyncio.StreamReader()
    reader.feed_eof()
    server = Api().serve_on(reader, Collected())
    await server.serve()
    with pytest.raises(RuntimeError, match="already"):
        await server.serve()


def test_line_reader_is_exported_for_reuse() -> None:
    assert LineReader.__doc__
