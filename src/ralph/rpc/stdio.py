"""The fastest NDJSON server a pair of descriptors allows, behind one interface.

A pollable input (a pipe, socket or terminal: what an editor gives its bridge) gets the
NdjsonPipeServer, which reads it from the event loop's reader callback and answers many
requests per read and per write. A regular file (`ralph bridge < requests.jsonl`) cannot be
watched by the loop, so it gets the stream-based NdjsonServer over a worker thread's reads.
Both answer exactly alike; only the cost per request differs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ralph.rpc.connection import Connection
from ralph.rpc.dispatcher import Dispatcher
from ralph.rpc.ndjson import DEFAULT_MAX_LINE_BYTES, NdjsonServer
from ralph.rpc.pipeserver import NdjsonPipeServer
from ralph.rpc.streams import Writer, fd_reader, fd_writer, pollable, take_stdio

__all__ = ["LineServer", "fd_server", "stdio_server"]


class LineServer(Protocol):
    """What NdjsonServer and NdjsonPipeServer both offer their owner."""

    at_eof: asyncio.Event

    @property
    def connection(self) -> Connection: ...

    async def serve(self) -> None: ...

    async def notify(self, method: str, params: dict[str, Any] | list[Any] | None) -> None: ...

    def stop_reading(self) -> None: ...

    def close(self) -> None: ...


async def fd_server(
    dispatcher: Dispatcher,
    read_fd: int,
    write_fd: int,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_in_flight: int = 256,
) -> tuple[LineServer, Writer]:
    """A server for `dispatcher` on two descriptors (both taken over), and its writer, which
    the owner closes after serving (and after any last notification)."""
    writer = await fd_writer(write_fd)
    if pollable(read_fd):
        return NdjsonPipeServer(dispatcher, read_fd, writer, max_line_bytes=max_line_bytes,
                                max_in_flight=max_in_flight), writer
    reader = await fd_reader(read_fd)
    return NdjsonServer(dispatcher, reader, writer, max_line_bytes=max_line_bytes,
                        max_in_flight=max_in_flight), writer


async def stdio_server(
    dispatcher: Dispatcher,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_in_flight: int = 256,
) -> tuple[LineServer, Writer]:
    """`fd_server` on the process's stdin and stdout, taken for the protocol alone as
    `stdio_streams` does (fd 0 becomes /dev/null, fd 1 a copy of stderr)."""
    return await fd_server(dispatcher, *take_stdio(), max_line_bytes=max_line_bytes,
                           max_in_flight=max_in_flight)
