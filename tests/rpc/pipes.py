"""A server and a client joined by two real OS pipes, on asyncio streams."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from ralph.rpc import Writer, fd_streams

GUARD_S = 30.0
"""Only turns a hang into a failure; no test measures time."""


class LineReader:
    """Reads newline-terminated lines of any length (the StreamReader's limit does not apply)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._buffer = bytearray()
        self._lines: list[bytes] = []

    async def line(self) -> bytes | None:
        """The next line without its newline; None at EOF."""
        while not self._lines:
            chunk = await self._reader.read(1 << 20)
            if not chunk:
                if self._buffer:
                    raise AssertionError(f"output ended mid-line: {bytes(self._buffer[:80])!r}")
                return None
            if b"\n" not in chunk:
                self._buffer += chunk
                continue
            *complete, rest = chunk.split(b"\n")
            complete[0] = bytes(self._buffer) + complete[0]
            self._lines.extend(complete)
            self._buffer = bytearray(rest)
        return self._lines.pop(0)

    async def message(self) -> Any:
        """The next line as JSON (it must be UTF-8 JSON)."""
        async with asyncio.timeout(GUARD_S):
            line = await self.line()
        assert line is not None, "expected a line, got EOF"
        return json.loads(line.decode("utf-8"))

    async def rest(self) -> list[Any]:
        """Every remaining line up to EOF, parsed."""
        messages = []
        async with asyncio.timeout(GUARD_S):
            while (line := await self.line()) is not None:
                messages.append(json.loads(line.decode("utf-8")))
        return messages


@dataclass
class Wire:
    server_reader: asyncio.StreamReader
    server_writer: Writer
    client_writer: Writer
    client: LineReader
    _closed: set[str] = field(default_factory=set)

    def send(self, *messages: bytes | dict[str, Any]) -> None:
        for message in messages:
            raw = (
                message
                if isinstance(message, bytes)
                else json.dumps(message, ensure_ascii=False).encode()
            )
            self.client_writer.write(raw + b"\n")

    def end_input(self) -> None:
        """The client closes its side of the server's input: EOF for the server."""
        if "input" not in self._closed:
            self._closed.add("input")
            self.client_writer.close()

    def end_output(self) -> None:
        """The server's owner closes the output: EOF for the client."""
        if "output" not in self._closed:
            self._closed.add("output")
            self.server_writer.close()


@asynccontextmanager
async def wire() -> AsyncIterator[Wire]:
    """Two pipes: client -> server input, server output -> client; everything closed after."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    server_reader, server_writer = await fd_streams(in_r, out_w)
    client_reader, client_writer = await fd_streams(out_r, in_w)
    joined = Wire(server_reader, server_writer, client_writer, LineReader(client_reader))
    try:
        yield joined
    finally:
        joined.end_input()
        joined.end_output()
        async with asyncio.timeout(GUARD_S):
            await server_reader.read()  # to EOF: the pipe transports close their fds
            await client_reader.read()
