"""NdjsonPipeServer over real pipes: reads cut anywhere, many requests per read and one write
for their answers, the line bound, EOF, a client that stops reading, slots, close."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ralph.rpc import (
    Dispatcher,
    NdjsonPipeServer,
    NdjsonServer,
    Registry,
    Writer,
    fd_server,
    fd_streams,
)
from ralph.rpc.streams import fd_writer, pollable
from tests.rpc.pipes import GUARD_S, LineReader

BIG = 100_000


class Size(BaseModel):
    size: int


class Api:
    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.slow_cancelled = False
        self.server: NdjsonPipeServer | None = None
        registry = Registry(title="pipe", version="0")

        @registry.method("ping", sync=True)
        def ping() -> dict[str, bool]:
            self.calls += 1
            return {"ok": True}

        @registry.method("big", params=Size, positional=("size",), sync=True)
        def big(params: Size) -> str:
            self.calls += 1
            return "b" * params.size

        @registry.method("slow")
        async def slow() -> str:
            self.slow_started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.slow_cancelled = True
                raise
            return "done"

        @registry.method("burst", params=Size)
        async def burst(params: Size) -> int:
            assert self.server is not None
            server = self.server
            await asyncio.gather(*(server.notify("event", {"n": n, "p": "n" * params.size})
                                   for n in range(10)))
            return 10

        self.dispatcher = Dispatcher(registry)


def _line(method: str, request_id: int, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


@dataclass
class Pipes:
    server: NdjsonPipeServer
    server_writer: Writer
    client_writer: Writer
    client: LineReader

    def send(self, data: bytes) -> None:
        self.client_writer.write(data)

    def end_input(self) -> None:
        self.client_writer.close()

    def end_output(self) -> None:
        """The server's owner closes its output: EOF for the client."""
        self.server_writer.close()


@asynccontextmanager
async def pipe_server(api: Api, **options: int) -> AsyncIterator[Pipes]:
    """The server on real pipes; the client's side as asyncio streams."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    server_writer = await fd_writer(out_w)
    server = NdjsonPipeServer(api.dispatcher, in_r, server_writer, **options)
    api.server = server
    client_reader, client_writer = await fd_streams(out_r, in_w)
    pipes = Pipes(server, server_writer, client_writer, LineReader(client_reader))
    try:
        yield pipes
    finally:
        client_writer.close()
        server_writer.close()
        async with asyncio.timeout(GUARD_S):
            await client_reader.read()


async def _turns(count: int = 20) -> None:
    """Let the loop run a few turns (the server reads and answers within them)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_request_split_across_reads_is_answered_once_complete() -> None:
    api = Api()
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        line = _line("ping", 1)
        for index in range(0, len(line) - 1, 7):
            pipes.send(line[index : min(index + 7, len(line) - 1)])
            await asyncio.sleep(0.01)  # lets each piece arrive as a read of its own
        assert api.calls == 0
        pipes.send(b"\n")
        assert await pipes.client.message() == {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}}
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)


class Recorder:
    """A writer that keeps every write apart."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes, /) -> None:
        self.writes.append(bytes(data))

    @property
    def writable(self) -> bool:
        return True

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None


async def test_many_requests_in_one_read_are_answered_with_one_write() -> None:
    api = Api()
    in_r, in_w = os.pipe()
    os.write(in_w, b"".join(_line("ping", index) for index in range(100)) + b"\n\r\n  \n")
    os.close(in_w)
    out = Recorder()
    server = NdjsonPipeServer(api.dispatcher, in_r, out)
    await asyncio.wait_for(server.serve(), GUARD_S)
    assert len(out.writes) == 1, "one read of 100 requests, one write of their answers"
    lines = out.writes[0].split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["id"] for line in lines[:-1]] == list(range(100))


async def test_lines_over_the_bound_are_refused_and_serving_goes_on() -> None:
    api = Api()
    too_long = {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Invalid Request",
        "data": {"reason": "the line is longer than 1000 bytes"}}}
    async with pipe_server(api, max_line_bytes=1000) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(_line("big", 1, ["x" * 5000]) + _line("ping", 2))
        assert await pipes.client.message() == too_long
        assert (await pipes.client.message())["id"] == 2
        pipes.send(b'{"pad":"' + b"y" * 300_000)  # over the bound, across many reads
        await asyncio.sleep(0.05)
        pipes.send(b'"}\n' + _line("ping", 3))
        assert await pipes.client.message() == too_long
        assert (await pipes.client.message())["id"] == 3
        pipes.send(b"z" * 2000)  # the last line, over the bound and without its newline
        pipes.end_input()
        assert await pipes.client.message() == too_long
        await asyncio.wait_for(serving, GUARD_S)


async def test_eof_without_a_final_newline_answers_the_last_line() -> None:
    api = Api()
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(_line("ping", 1) + _line("ping", 2)[:-1])
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)
        assert pipes.server.at_eof.is_set()
        assert [(await pipes.client.message())["id"] for _ in range(2)] == [1, 2]


async def test_a_client_that_stops_reading_stops_the_server_reading() -> None:
    """Answers of 100 KB to 200 small requests: the output fills, the server stops
    dispatching (memory stays bounded), and everything is answered once the client reads."""
    api = Api()
    count = 200
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(b"".join(_line("big", index, [BIG]) for index in range(count)))
        await asyncio.sleep(0.2)
        await _turns()
        stalled_at = api.calls
        # What fills before the server stops: the client's stream buffer (2 MiB), the pipe
        # (64 KiB) and the server's writer (its high-water mark, plus one turn's answers).
        assert 0 < stalled_at < 60, "dispatching stops while the output does not drain"
        pipes.send(b"".join(_line("ping", count + index) for index in range(50)))
        await asyncio.sleep(0.1)
        assert api.calls == stalled_at, "nothing more is read or dispatched meanwhile"
        ids = []
        for _ in range(count + 50):
            message = await pipes.client.message()
            assert message["result"] == ("b" * BIG if message["id"] < count else {"ok": True})
            ids.append(message["id"])
        assert ids == list(range(count + 50))
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)


async def test_reading_waits_for_a_free_slot_and_answers_keep_their_order() -> None:
    api = Api()
    async with pipe_server(api, max_in_flight=1) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(_line("slow", 1) + _line("ping", 2) + _line("ping", 3))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        await asyncio.sleep(0.05)
        assert api.calls == 0, "no line is dispatched while every slot is taken"
        api.release.set()
        assert [(await pipes.client.message())["id"] for _ in range(3)] == [1, 2, 3]
        pipes.end_input()
        await asyncio.wait_for(serving, GUARD_S)


async def test_notifications_and_answers_never_share_a_line() -> None:
    api = Api()
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        reading = asyncio.create_task(pipes.client.rest())
        for index in range(30):
            pipes.send(_line("big", index, [BIG]) + _line("ping", 100 + index))
            if index % 10 == 0:
                pipes.send(_line("burst", 1000 + index, {"size": BIG}))
        outside = [asyncio.create_task(pipes.server.notify("event", {"o": n, "p": "o" * BIG}))
                   for n in range(10)]
        pipes.end_input()
        await asyncio.wait_for(asyncio.gather(serving, *outside), GUARD_S)
        await pipes.server.notify("event", {"last": True})  # the owner may still send
        pipes.end_output()
        messages = await reading
    responses = {message["id"]: message["result"] for message in messages if "id" in message}
    assert sorted(responses) == sorted([*range(30), *range(100, 130), 1000, 1010, 1020])
    assert all(responses[index] == "b" * BIG for index in range(30))
    assert all(responses[index] == 10 for index in (1000, 1010, 1020))
    events = [message for message in messages if "id" not in message]
    assert len(events) == 3 * 10 + 10 + 1


async def test_stop_reading_answers_what_is_in_flight_then_returns() -> None:
    api = Api()
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(_line("slow", 1))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        pipes.server.stop_reading()
        assert pipes.server.at_eof.is_set()
        await _turns()
        assert not serving.done(), "serve() waits for the request in flight"
        api.release.set()
        await asyncio.wait_for(serving, GUARD_S)
        assert await pipes.client.message() == {"jsonrpc": "2.0", "id": 1, "result": "done"}


async def test_close_cancels_handlers_without_answers() -> None:
    api = Api()
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(_line("slow", 1))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        pipes.server.close()
        await asyncio.wait_for(serving, GUARD_S)
        assert api.slow_cancelled


async def test_cancelling_serve_closes_the_server_and_serve_runs_once() -> None:
    api = Api()
    async with pipe_server(api) as pipes:
        serving = asyncio.create_task(pipes.server.serve())
        pipes.send(_line("slow", 1))
        await asyncio.wait_for(api.slow_started.wait(), GUARD_S)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        await asyncio.wait_for(pipes.server.connection.drain(), GUARD_S)
        assert api.slow_cancelled
        with pytest.raises(RuntimeError, match="already"):
            await pipes.server.serve()


async def test_a_gone_peer_ends_serving() -> None:
    api = Api()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.close(out_r)
    server_writer = await fd_writer(out_w)
    server = NdjsonPipeServer(api.dispatcher, in_r, server_writer)
    os.write(in_w, _line("ping", 1) + _line("ping", 2))
    try:
        await asyncio.wait_for(server.serve(), GUARD_S)
        assert server.connection.lost
        await server.notify("event", {"type": "dropped"})  # dropped, not raised
    finally:
        os.close(in_w)
        server_writer.close()
        await _turns()


async def test_fd_server_serves_a_pipe_with_the_pipe_server_and_a_file_with_streams(
    tmp_path: Path,
) -> None:
    api = Api()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    server, writer = await fd_server(api.dispatcher, in_r, out_w)
    assert isinstance(server, NdjsonPipeServer)
    os.close(in_w)
    await asyncio.wait_for(server.serve(), GUARD_S)
    writer.close()
    os.close(out_r)

    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_line("ping", 1) + _line("ping", 2))
    responses = tmp_path / "responses.jsonl"
    read_fd = os.open(requests, os.O_RDONLY)
    write_fd = os.open(responses, os.O_WRONLY | os.O_CREAT)
    server, writer = await fd_server(api.dispatcher, read_fd, write_fd)
    assert isinstance(server, NdjsonServer)
    await asyncio.wait_for(server.serve(), GUARD_S)
    writer.close()
    assert sorted(json.loads(line)["id"] for line in responses.read_bytes().splitlines()) == [
        1, 2]


async def test_dev_null_as_input_is_read_blocking_and_ends_at_once() -> None:
    """epoll refuses /dev/null (a character device): it is served like a regular file."""
    null = os.open(os.devnull, os.O_RDONLY)
    assert not pollable(null)
    out_r, out_w = os.pipe()
    assert pollable(out_r)
    server, writer = await fd_server(Api().dispatcher, null, out_w)
    assert isinstance(server, NdjsonServer)
    await asyncio.wait_for(server.serve(), GUARD_S)
    writer.close()
    os.close(out_r)
