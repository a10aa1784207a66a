"""A session's output as it arrives: each stream's bytes appended to `outputs/<stream>.txt`
as they are, and a `provider.raw` event {stream, chunk} per read with the text of the
bytes read. Each stream is decoded incrementally, so a UTF-8 character whose bytes arrive
in two reads is sent whole with the second (the original decoded each read on its own and
sent two replacement characters); bytes that are not UTF-8 become U+FFFD.

Writes happen in the event loop as the chunks arrive (an append to a local file each):
the pipes are read no faster than the files take the bytes, so memory stays bounded
whatever the command prints.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ralph.company.events import append_event, envelope
from ralph.company.layout import EVENTS_FILE

STREAMS = ("stdout", "stderr")
MAX_LINE_BYTES = 1 << 20  # a longer line is passed on in pieces (memory stays bounded)
LineSink = Callable[[str, str, int], None]
"""(stream, line, offset of its first byte in outputs/<stream>.txt)."""


class Tee:
    """Where a running session's stdout and stderr go (see the module docstring)."""

    def __init__(self, run: Path, run_id: str, actor: str, session_ref: str,
                 on_line: LineSink | None = None) -> None:
        outputs = run / "outputs"
        outputs.mkdir(parents=True, exist_ok=True)
        self._events = run / EVENTS_FILE
        self._run_id = run_id
        self._actor = actor
        self._session_ref = session_ref
        self._files: dict[str, BinaryIO] = {}
        for stream in STREAMS:  # truncated, as each launch starts its outputs afresh
            self._files[stream] = (outputs / f"{stream}.txt").open("wb", buffering=0)
        self._decoders = {s: codecs.getincrementaldecoder("utf-8")("replace") for s in STREAMS}
        self._lines = {s: Lines(s, on_line) for s in STREAMS} if on_line else None

    def feed(self, stream: str, data: bytes) -> None:
        _write_fully(self._files[stream], data)
        self._send(stream, self._decoders[stream].decode(data))
        if self._lines is not None:
            self._lines[stream].feed(data)

    def close(self) -> None:
        """The output ended: what the decoders and line splitters still hold is sent (a
        character cut off by the end becomes U+FFFD), the files are closed."""
        for stream in STREAMS:
            self._send(stream, self._decoders[stream].decode(b"", final=True))
            if self._lines is not None:
                self._lines[stream].flush()
            with contextlib.suppress(OSError):
                self._files[stream].close()

    def _send(self, stream: str, text: str) -> None:
        if text:
            append_event(self._events, envelope(
                self._run_id, "provider.raw", {"stream": stream, "chunk": text},
                actor=self._actor, visibility="team", session_ref=self._session_ref))


class Lines:
    """One stream's bytes as lines (without their `\\n`), each with the offset of its first
    byte in the stream; a line longer than MAX_LINE_BYTES comes in pieces."""

    def __init__(self, stream: str, sink: LineSink) -> None:
        self._stream = stream
        self._sink = sink
        self._pending = bytearray()
        self._start = 0  # offset of the pending bytes' first one

    def feed(self, data: bytes) -> None:
        self._pending += data
        while True:
            cut = self._pending.find(b"\n")
            if cut < 0:
                if len(self._pending) < MAX_LINE_BYTES:
                    return
                cut, skip = MAX_LINE_BYTES, 0
            else:
                skip = 1
            self._emit(bytes(self._pending[:cut]))
            del self._pending[:cut + skip]
            self._start += cut + skip

    def flush(self) -> None:
        if self._pending:
            self._emit(bytes(self._pending))
            self._start += len(self._pending)
            self._pending.clear()

    def _emit(self, line: bytes) -> None:
        self._sink(self._stream, line.decode("utf-8", "replace").rstrip("\r"), self._start)


def _write_fully(file: BinaryIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = file.write(view)
        if not written:
            raise OSError(f"{file.name}: the file accepted no bytes")
        view = view[written:]
