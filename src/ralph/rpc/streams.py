"""asyncio streams over file descriptors, and the stdio pair a JSON-RPC server speaks on.

`stdio_streams` makes the protocol the only thing on the process's stdin and stdout: it moves
the original fds 0 and 1 to private descriptors for the streams and points fd 0 at /dev/null
and fd 1 at stderr. A stray `print`, a library writing to stdout or a child process that
inherits fd 1 then lands on stderr instead of corrupting the protocol, and nothing can read
input meant for the server.

Pipes, sockets and terminals get non-blocking asyncio transports. A regular file (`ralph
bridge < requests.jsonl > out.jsonl`) cannot be polled, so it is read in a worker thread and
written with plain blocking writes (a disk file is always writable).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import stat
import sys
from typing import Protocol

__all__ = [
    "FdWriter",
    "SupportsWrite",
    "Writer",
    "fd_reader",
    "fd_streams",
    "fd_writer",
    "pollable",
    "stdio_streams",
    "take_stdio",
]

_READER_LIMIT = 1024 * 1024
"""Bytes the StreamReader buffers before pausing the transport (twice this, in fact)."""
_FILE_CHUNK = 1024 * 1024


class SupportsWrite(Protocol):
    """Anything that takes bytes: a StreamWriter, a binary file, a test's collector."""

    def write(self, data: bytes, /) -> object: ...


class Writer(Protocol):
    """The writing half returned by `fd_streams`; an asyncio StreamWriter has this shape too."""

    def write(self, data: bytes, /) -> object: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class FdWriter(Writer, Protocol):
    """A Writer that says whether it takes more now: what `fd_writer` returns."""

    @property
    def writable(self) -> bool:
        """False while the peer does not keep up (await `drain()`) or once it is gone."""
        ...


async def stdio_streams() -> tuple[asyncio.StreamReader, Writer]:
    """The process's stdin and stdout as asyncio streams, owned by the protocol alone.

    Call it before anything reads stdin. Afterwards fd 0 is /dev/null and fd 1 is a copy of
    fd 2 (stderr); `sys.stdout` (flushed first) writes there too.
    """
    return await fd_streams(*take_stdio())


def take_stdio() -> tuple[int, int]:
    """Move the original stdin and stdout to private descriptors, returned (read, write), and
    point fd 0 at /dev/null and fd 1 at stderr: the protocol alone reads and writes them."""
    sys.stdout.flush()
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    return protocol_in, protocol_out


async def fd_streams(read_fd: int, write_fd: int) -> tuple[asyncio.StreamReader, Writer]:
    """A StreamReader on `read_fd` and a Writer on `write_fd`; both fds are taken over (closed
    with the streams)."""
    return await fd_reader(read_fd), await fd_writer(write_fd)


async def fd_reader(read_fd: int) -> asyncio.StreamReader:
    """A StreamReader on `read_fd` (taken over): an asyncio read-pipe transport for a pipe,
    socket or terminal; a worker thread's reads for a regular file."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READER_LIMIT, loop=loop)
    if pollable(read_fd):
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            os.fdopen(read_fd, "rb", buffering=0),
        )
    else:
        _start_file_feeder(reader, read_fd)
    return reader


async def fd_writer(write_fd: int) -> FdWriter:
    """A Writer on `write_fd` (taken over): an asyncio write-pipe transport for a pipe, socket
    or terminal (a write goes out at once when the pipe has room, the rest is buffered);
    blocking writes for a regular file."""
    if pollable(write_fd):
        transport, protocol = await asyncio.get_running_loop().connect_write_pipe(
            _WriteProtocol, os.fdopen(write_fd, "wb", buffering=0)
        )
        return _PipeWriter(transport, protocol)
    return _FileWriter(write_fd)


def pollable(fd: int) -> bool:
    """Whether the event loop can watch `fd`: a pipe, a socket, a terminal; not a disk file,
    nor a character device epoll refuses (/dev/null), which are read and written blocking."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return True
    return stat.S_ISCHR(mode) and _epoll_accepts(fd)


def _epoll_accepts(fd: int) -> bool:
    if not hasattr(select, "epoll"):
        return True  # another selector: as before, let the loop try
    with select.epoll() as probe:
        try:
            probe.register(fd, select.EPOLLIN)
        except PermissionError:
            return False
    return True


_feeders: set[asyncio.Task[None]] = set()
"""Running file feeders (a task needs a reference until it is done)."""


def _start_file_feeder(reader: asyncio.StreamReader, fd: int) -> None:
    async def feed() -> None:
        try:
            while chunk := await asyncio.to_thread(os.read, fd, _FILE_CHUNK):
                reader.feed_data(chunk)
        except OSError as exc:
            reader.set_exception(exc)
        else:
            reader.feed_eof()
        finally:
            os.close(fd)

    task = asyncio.get_running_loop().create_task(feed())
    _feeders.add(task)
    task.add_done_callback(_feeders.discard)


class _WriteProtocol(asyncio.Protocol):
    """Flow control for a write pipe: pause/resume from the transport, and its end."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self._resumed: asyncio.Future[None] | None = None
        self.closed: asyncio.Future[None] = loop.create_future()
        self.lost: BaseException | None = None
        self._loop = loop

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = self._loop.create_future()

    def resume_writing(self) -> None:
        self._wake()

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or ConnectionResetError("the pipe was closed")
        self._wake()
        if not self.closed.done():
            self.closed.set_result(None)

    @property
    def writable(self) -> bool:
        return self._resumed is None and self.lost is None

    async def wait_writable(self) -> None:
        """Return once the transport takes more data; raise once it is gone."""
        if self.lost is not None:
            raise ConnectionResetError(f"connection lost: {self.lost}")
        if self._resumed is not None:
            await self._resumed
            if self.lost is not None:
                raise ConnectionResetError(f"connection lost: {self.lost}")

    def _wake(self) -> None:
        if self._resumed is not None:
            if not self._resumed.done():
                self._resumed.set_result(None)
            self._resumed = None


class _PipeWriter:
    """A Writer on an asyncio write-pipe transport (what StreamWriter would be, without a
    reader half)."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: _WriteProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes, /) -> None:
        if self._protocol.lost is not None:
            raise ConnectionResetError(f"connection lost: {self._protocol.lost}")
        self._transport.write(data)

    @property
    def writable(self) -> bool:
        return self._protocol.writable

    async def drain(self) -> None:
        await self._protocol.wait_writable()

    def close(self) -> None:
        self._transport.close()

    async def wait_closed(self) -> None:
        await self._protocol.closed


class _FileWriter:
    """Blocking writes to a regular file, shaped like a StreamWriter."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._closed = False

    def write(self, data: bytes, /) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    @property
    def writable(self) -> bool:
        return True  # a disk file takes every write at once (a write after close raises)

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(OSError):
                os.close(self._fd)

    async def wait_closed(self) -> None:
        return None
