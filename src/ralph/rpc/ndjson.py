"""NdjsonServer: JSON-RPC over newline-delimited JSON on a pair of asyncio streams.

The framing is the whole of this module: split the input at newlines (lines of any length up
to `max_line_bytes`, independent of the StreamReader's own limit), write each outgoing
message followed by one newline. Everything else, concurrency included, is the Connection's
and the Dispatcher's, which the WebSocket server reuses with its own framing.

Blank lines are skipped and a trailing carriage return is dropped, so a client that writes
CRLF or an empty line between messages is understood. A line over the limit is discarded as
it streams in (memory stays bounded) and answered with -32600 and id null.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from ralph.rpc.connection import Connection
from ralph.rpc.dispatcher import Dispatcher, invalid_request
from ralph.rpc.envelope import NULL_ID
from ralph.rpc.lines import TOO_LONG, LineSplitter, clean_line
from ralph.rpc.streams import SupportsWrite

__all__ = ["DEFAULT_MAX_LINE_BYTES", "NdjsonServer"]

DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024 * 1024
_READ_SIZE: Final = 256 * 1024
_NEWLINE: Final = b"\n"


class NdjsonServer:
    """Serves a Dispatcher on `reader`/`writer`: one JSON text per line in each direction.

    `writer` is an asyncio StreamWriter or anything with `write(bytes)` (then `drain()` is
    awaited if it has one, else `flush()` called if it has one). The server writes nothing but
    protocol lines and never closes the writer: after `serve()` returns the owner may still
    send notifications (a "stopped" event, say) and closes it.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | SupportsWrite,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_in_flight: int = 256,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._reader = reader
        self._writer = writer
        self._max_line = max_line_bytes
        drain = getattr(writer, "drain", None)
        flush = getattr(writer, "flush", None)
        self._drain: Callable[[], Awaitable[Any]] | None = drain if callable(drain) else None
        self._flush: Callable[[], Any] | None = (
            flush if self._drain is None and callable(flush) else None
        )
        self._log = logging.getLogger("ralph.rpc")
        self._connection = Connection(
            dispatcher, self._write_line, max_in_flight=max_in_flight, on_lost=self.close
        )
        self._read_task: asyncio.Task[None] | None = None
        self._closed = False
        self.at_eof = asyncio.Event()
        """Set when the input has ended (serve() then still waits for the requests in flight)."""

    @property
    def connection(self) -> Connection:
        """The transport-independent part (in-flight count, raw `send`)."""
        return self._connection

    async def serve(self) -> None:
        """Read and answer lines until EOF (or `close()`); runs once per server.

        At EOF it returns once every request in flight has been answered; after `close()`,
        once the cancelled handlers have finished. Cancelling `serve()` itself closes the server.
        """
        if self._read_task is not None:
            raise RuntimeError("serve() has already been called")
        self._read_task = asyncio.create_task(self._read_lines())
        try:
            await asyncio.wait({self._read_task})
            if not self._read_task.cancelled() and (exc := self._read_task.exception()):
                self._log.warning("rpc: reading the input failed (%r); treating it as EOF", exc)
            await self._connection.drain()
            await self._flush_output()
        except asyncio.CancelledError:
            self.close()
            raise

    async def notify(self, method: str, params: dict[str, Any] | list[Any] | None) -> None:
        """Send a notification line (never in the middle of another line)."""
        await self._connection.notify(method, params)

    def stop_reading(self) -> None:
        """Treat the input as ended (a shutdown asked for by a signal, say): serve() returns
        once the requests in flight have been answered, as at EOF."""
        if self._read_task is not None:
            self._read_task.cancel()
        else:
            self.at_eof.set()

    def close(self) -> None:
        """Stop reading and cancel the handlers in flight; serve() returns once they are done."""
        if self._closed:
            return
        self._closed = True
        if self._read_task is not None:
            self._read_task.cancel()
        self._connection.cancel()

    async def _write_line(self, data: bytes) -> None:
        self._writer.write(data + _NEWLINE)
        if self._drain is not None:
            await self._drain()
        elif self._flush is not None:
            self._flush()

    async def _flush_output(self) -> None:
        if self._drain is None or self._connection.lost:
            return
        with contextlib.suppress(OSError, RuntimeError):
            await self._drain()

    async def _read_lines(self) -> None:
        """Split the input into lines and submit each; the line limit bounds the buffer."""
        try:
            lines = LineSplitter(self._max_line)
            while not self._closed:
                chunk = await self._reader.read(_READ_SIZE)
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    await self._line(line)
            if not self._closed:
                for line in lines.end():  # a last line without its newline
                    await self._line(line)
        finally:
            self.at_eof.set()

    async def _line(self, line: bytes | None) -> None:
        if line is TOO_LONG:
            await self._too_long()
            return
        line = clean_line(line)
        if line:
            await self._connection.submit(line)

    async def _too_long(self) -> None:
        self._log.warning("rpc: discarded an input line over %d bytes", self._max_line)
        await self._connection.send(
            invalid_request(NULL_ID, f"the line is longer than {self._max_line} bytes")
        )
