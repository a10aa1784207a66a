"""A small HTTP/1.1 client of opencode's server (`opencode serve`) on 127.0.0.1: JSON
requests with Basic auth, every one about a directory, and its server-sent events. One
connection per request; no proxies, nothing but loopback. Used by ralph.approvals.opencode_run.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import orjson

USERNAME = "opencode"  # the server's Basic auth user (OPENCODE_SERVER_USERNAME's default)
REQUEST_TIMEOUT_S = 30.0
MAX_EVENT_BYTES = 64 * 1024 * 1024  # one server-sent event at most (a tool's whole output)


class BridgeError(Exception):
    """The run cannot go on; the message says why, in one line."""


class NoAnswer(BridgeError):
    """The server did not answer a request in time."""


class HttpError(BridgeError):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(f"opencode's server answered {method} {path} with "
                         f"HTTP {status}: {_message_of(body)}")
        self.status = status


def _message_of(body: bytes) -> str:
    """The message of an error response ({"name", "data": {"message"}} or {"message"})."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        inner = data.get("data")
        message = inner.get("message") if isinstance(inner, dict) else data.get("message")
        if message:
            return str(message)[:300]
    return body.decode("utf-8", "replace").strip()[:300] or "(no body)"


class Client:
    """HTTP/1.1 to the server on 127.0.0.1:`port` (one connection per request), with Basic
    auth and every request about `directory`."""

    def __init__(self, port: int, password: str, directory: str) -> None:
        self.port = port
        self._auth = "Basic " + base64.b64encode(f"{USERNAME}:{password}".encode()).decode()
        self._directory = quote(directory, safe="/")

    async def call(self, method: str, path: str, body: object = None, *,
                   timeout_s: float = REQUEST_TIMEOUT_S) -> Any:
        """The response's JSON (None if it has no body); HttpError unless it is 2xx."""
        try:
            return await asyncio.wait_for(self._call(method, path, body), timeout_s)
        except TimeoutError:
            raise NoAnswer(f"opencode's server did not answer {method} {path} within "
                           f"{timeout_s:g} s") from None

    async def _call(self, method: str, path: str, body: object) -> Any:
        reader, writer, status, headers = await self._send(method, path, body)
        try:
            data = b"".join([chunk async for chunk in _body(reader, headers)])
        finally:
            writer.close()
        if not 200 <= status < 300:
            raise HttpError(method, path, status, data)
        return orjson.loads(data) if data.strip() else None

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """The server's events for the directory, from its first one (`server.connected`:
        the subscription is in place) until the stream ends."""
        try:
            reader, writer, status, headers = await asyncio.wait_for(
                self._send("GET", "/event", None), REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise NoAnswer("opencode's server did not answer GET /event within "
                           f"{REQUEST_TIMEOUT_S:g} s") from None
        try:
            if status != 200:
                data = b"".join([chunk async for chunk in _body(reader, headers)])
                raise HttpError("GET", "/event", status, data)
            async for event in _sse(_body(reader, headers)):
                yield event
        finally:
            writer.close()

    async def _send(self, method: str, path: str, body: object
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[str, str]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            data = b"" if body is None else orjson.dumps(body)
            sep = "&" if "?" in path else "?"
            head = [f"{method} {path}{sep}directory={self._directory} HTTP/1.1",
                    f"Host: 127.0.0.1:{self.port}", f"Authorization: {self._auth}",
                    "Connection: close", f"Content-Length: {len(data)}"]
            if body is not None:
                head.append("Content-Type: application/json")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
            await writer.drain()
            status_line = await reader.readline()
            parts = status_line.split()
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
                raise ConnectionError(f"not an HTTP response: {status_line[:80]!r}")
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
        except BaseException:
            writer.close()
            raise
        return reader, writer, int(parts[1]), headers


async def _body(reader: asyncio.StreamReader, headers: Mapping[str, str]
                ) -> AsyncIterator[bytes]:
    """A response's body as it arrives: chunked, of a known length, or until the end."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)  # the chunk's CRLF
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length:
            yield await reader.readexactly(length)
    else:
        while chunk := await reader.read(65536):
            yield chunk


async def _sse(chunks: AsyncIterator[bytes]) -> AsyncIterator[dict[str, Any]]:
    """Server-sent events' JSON `data` (an event's data lines joined), dicts only."""
    pending = bytearray()
    data: list[bytes] = []
    async for chunk in chunks:
        scanned = len(pending)
        pending += chunk
        start = 0
        while (end := pending.find(b"\n", max(start, scanned))) >= 0:
            line = bytes(pending[start:end]).rstrip(b"\r")
            start = end + 1
            if line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            elif not line and data:
                event = orjson.loads(b"\n".join(data))
                data = []
                if isinstance(event, dict):
                    yield event
        del pending[:start]
        if len(pending) + sum(map(len, data)) > MAX_EVENT_BYTES:
            raise BridgeError(f"opencode's server sent an event of more than "
                              f"{MAX_EVENT_BYTES // 2**20} MiB")
