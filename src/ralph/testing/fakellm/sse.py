"""Writing a streamed HTTP body: chunked on HTTP/1.1 (the connection stays usable),
close-delimited on HTTP/1.0."""

from __future__ import annotations

from typing import BinaryIO


class StreamWriter:
    """Writes body pieces to the client as they come; `close()` ends the body."""

    def __init__(self, wfile: BinaryIO, *, chunked: bool) -> None:
        self._wfile = wfile
        self._chunked = chunked
        self._closed = False

    def write(self, data: bytes) -> None:
        if not data or self._closed:
            return
        if self._chunked:
            self._wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
        else:
            self._wfile.write(data)
        self._wfile.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._chunked:
            self._wfile.write(b"0\r\n\r\n")
        self._wfile.flush()


def read_chunked(rfile: BinaryIO, limit: int) -> bytes:
    """A chunked request body (trailers skipped); at most `limit` bytes."""
    body = bytearray()
    while True:
        line = rfile.readline(1024)
        if not line:
            break
        size = int(line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                pass
            break
        if len(body) + size > limit:
            raise ValueError("request body too large")
        body += rfile.read(size)
        rfile.readline(1024)
    return bytes(body)
