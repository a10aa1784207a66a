"""NdjsonPipeServer: JSON-RPC over NDJSON on a pipe, read by the event loop's reader callback.

The stream-based NdjsonServer pays, for every request, a wake-up of its reading task, a task
for the request, the write lock and one write: several turns of the event loop and a syscall
per response. This transport does per read of the input what that one does per request:

- the event loop calls `_on_readable` when the input has data; one `os.read` takes up to
  256 KiB, however many requests that holds, and LineSplitter cuts it into lines;
- each line is dispatched on that same turn (Connection.start): what needs no waiting (an
  error, a `sync=True` method) is answered at once, without a task; an async handler gets
  its own task as in the stream server and sends its answer when it is ready;
- the answers of the turn are joined and written with one write.

The framing and the JSON-RPC behaviour are the stream server's, line for line: the same
splitter, the same answers to over-long and blank lines, the same EOF and close semantics.

Backpressure: reading stops while `max_in_flight` requests are running or while the output
does not keep up (the writer's buffer is over its high-water mark, e.g. a client that stopped
reading), and resumes once a slot is free and the output has drained. Lines already read
wait meanwhile, so memory stays bounded by one read and one turn's answers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from typing import Any, Final

from ralph.rpc.connection import Connection
from ralph.rpc.dispatcher import Dispatcher, invalid_request
from ralph.rpc.envelope import NULL_ID
from ralph.rpc.lines import TOO_LONG, LineSplitter, clean_line
from ralph.rpc.ndjson import DEFAULT_MAX_LINE_BYTES
from ralph.rpc.streams import FdWriter

__all__ = ["NdjsonPipeServer"]

_READ_SIZE: Final = 256 * 1024
_TURN_BYTES: Final = 256 * 1024
"""Answers gathered in one turn are written out once they reach this size, so that a read
full of requests for big answers cannot gather more than this before the writer says stop."""
_NEWLINE: Final = b"\n"


class NdjsonPipeServer:
    """Serves a Dispatcher on a pollable input fd (a pipe, socket or terminal) and a writer.

    `read_fd` is taken over (made non-blocking, closed when the input ends). `writer` is what
    `ralph.rpc.streams.fd_writer` returns; the server never closes it: after `serve()` returns
    the owner may still send notifications, then closes it. The interface is NdjsonServer's.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        read_fd: int,
        writer: FdWriter,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_in_flight: int = 256,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._fd = read_fd
        self._writer = writer
        self._max_line = max_line_bytes
        self._splitter = LineSplitter(max_line_bytes)
        self._lines: collections.deque[bytes | None] = collections.deque()
        self._log = logging.getLogger("ralph.rpc")
        self._connection = Connection(
            dispatcher, self._write_line, max_in_flight=max_in_flight, on_lost=self.close
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False  # registered with the loop's add_reader
        self._input_open = True  # until EOF, a failed read, stop_reading() or close()
        self._eof_read = False  # a read returned b"": the input ends once its lines are handled
        self._resuming: asyncio.Task[None] | None = None
        self._done: asyncio.Future[None] | None = None
        self._serving = False
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
        if self._serving:
            raise RuntimeError("serve() has already been called")
        self._serving = True
        self._loop = asyncio.get_running_loop()
        self._done = self._loop.create_future()
        try:
            if self._input_open:
                os.set_blocking(self._fd, False)
                self._watch()
            else:
                self._done.set_result(None)
            await self._done
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
        once the requests in flight have been answered, as at EOF. Lines read but not yet
        dispatched are dropped."""
        self._end_input()

    def close(self) -> None:
        """Stop reading and cancel the handlers in flight; serve() returns once they are done."""
        if self._closed:
            return
        self._closed = True
        self._end_input()
        self._connection.cancel()

    def _on_readable(self) -> None:
        """The loop's reader callback: one read, then every complete line in it."""
        try:
            chunk = os.read(self._fd, _READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._log.warning("rpc: reading the input failed (%r); treating it as EOF", exc)
            self._end_input()
            return
        if chunk:
            self._lines.extend(self._splitter.feed(chunk))
        else:
            self._lines.extend(self._splitter.end())  # a last line without its newline
            self._eof_read = True
            self._unwatch()
        self._answer_lines()

    def _answer_lines(self) -> None:
        """Dispatch the lines read, as long as a slot is free and the output keeps up; write
        the answers ready now together."""
        lines = self._lines
        connection = self._connection
        writer = self._writer
        answers: list[bytes] = []
        size = 0
        while lines and connection.has_slot and writer.writable:
            line = lines.popleft()
            if line is TOO_LONG:
                answer = self._too_long()
            else:
                line = clean_line(line)
                if not line:
                    continue
                started = connection.start(line)
                if started is None:
                    continue  # nothing to answer, or answered later by the handler's task
                answer = started
            answers.append(answer)
            size += len(answer)
            if size >= _TURN_BYTES:
                self._write(answers)
                answers = []
                size = 0
        if answers:
            self._write(answers)
        if not self._input_open:
            return
        if lines:
            self._pause()
        elif self._eof_read:
            self._end_input()
        else:
            self._watch()

    def _too_long(self) -> bytes:
        self._log.warning("rpc: discarded an input line over %d bytes", self._max_line)
        return invalid_request(NULL_ID, f"the line is longer than {self._max_line} bytes")

    def _write(self, answers: list[bytes]) -> None:
        """One write for a turn's answers, each on its own line."""
        if self._connection.lost:
            return
        answers.append(b"")  # the last answer's newline
        try:
            self._writer.write(_NEWLINE.join(answers))
        except Exception as exc:  # the peer is gone: the same as a failed send
            self._connection.mark_lost(exc)

    def _pause(self) -> None:
        """Stop reading until a slot is free and the output has drained."""
        self._unwatch()
        if self._resuming is None and self._loop is not None:
            self._resuming = self._loop.create_task(self._resume())

    async def _resume(self) -> None:
        try:
            while True:
                if not self._connection.has_slot:
                    await self._connection.wait_for_slot()
                elif not self._writer.writable:
                    await self._writer.drain()
                else:
                    break
        except (ConnectionError, OSError) as exc:  # the output is gone
            self._resuming = None
            self._connection.mark_lost(exc)  # closes the server
            return
        self._resuming = None
        if self._input_open:
            self._answer_lines()

    def _watch(self) -> None:
        if not self._watching and self._input_open and self._loop is not None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching and self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._watching = False

    def _end_input(self) -> None:
        """No more input: stop watching, close the fd, let serve() go on to drain."""
        if not self._input_open:
            return
        self._input_open = False
        self._unwatch()
        self._lines.clear()
        if self._resuming is not None:
            self._resuming.cancel()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self.at_eof.set()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def _write_line(self, data: bytes) -> None:
        """The connection's send: responses of async handlers, and notifications."""
        self._writer.write(data + _NEWLINE)
        await self._writer.drain()

    async def _flush_output(self) -> None:
        if self._connection.lost:
            return
        with contextlib.suppress(OSError, RuntimeError):
            await self._writer.drain()
