"""LineSplitter: a byte stream cut into newline-terminated lines, with a bound on their length.

Both NDJSON transports (asyncio streams, and a raw pipe read by the event loop's reader
callback) feed it whatever one read returned: part of a line, one line, or many. A line over
the bound is dropped as it streams in (at most the bound is ever buffered) and reported in
its place as `TOO_LONG`, so that the transport answers it in order with the lines around it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TOO_LONG", "LineSplitter", "clean_line"]

TOO_LONG: Final = None
"""Stands, in what `feed` and `end` return, for a line that was longer than the bound."""

_NEWLINE: Final = b"\n"


class LineSplitter:
    """Lines without their newline, in order; `TOO_LONG` for each line over `max_line` bytes."""

    __slots__ = ("_discarding", "_max", "_pending")

    def __init__(self, max_line: int) -> None:
        if max_line < 1:
            raise ValueError("max_line must be positive")
        self._max = max_line
        self._pending = bytearray()  # the start of a line whose newline has not come yet
        self._discarding = False  # inside a line over the bound: drop bytes up to its newline

    def feed(self, chunk: bytes) -> list[bytes | None]:
        """The lines that `chunk` completes (the rest is kept for the next call)."""
        end = chunk.rfind(_NEWLINE)
        if end < 0:
            if not self._discarding:
                if len(self._pending) + len(chunk) > self._max:
                    self._pending = bytearray()
                    self._discarding = True
                else:
                    self._pending += chunk
            return []
        parts = chunk[:end].split(_NEWLINE)
        discarded_first = self._discarding
        if self._pending:
            parts[0] = bytes(self._pending) + parts[0]
        rest = chunk[end + 1 :]
        self._discarding = len(rest) > self._max
        self._pending = bytearray() if self._discarding else bytearray(rest)
        limit = self._max
        lines: list[bytes | None]
        if len(chunk) > limit or len(parts[0]) > limit:
            # Only then can a line be over the bound: the common read of whole small lines
            # skips this pass.
            lines = [TOO_LONG if len(line) > limit else line for line in parts]
        else:
            lines = list(parts)
        if discarded_first:
            lines[0] = TOO_LONG  # the end of a line whose start was dropped
        return lines

    def end(self) -> list[bytes | None]:
        """At the end of the input: the last line if it had no newline (or `TOO_LONG`)."""
        if self._discarding:
            last: list[bytes | None] = [TOO_LONG]
        elif self._pending:
            last = [bytes(self._pending)]
        else:
            last = []
        self._pending = bytearray()
        self._discarding = False
        return last


def clean_line(line: bytes) -> bytes:
    """The message in a line: a trailing carriage return dropped (CRLF clients), and nothing
    (b"") for a blank line, which is skipped."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line or line.isspace():
        return b""
    return line
