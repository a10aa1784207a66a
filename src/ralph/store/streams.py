"""Stream files: where a stream lives on disk, which streams exist, and reading a file's tail."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ralph.store.frame import STREAM_SUFFIX, LineError, decode_line

_TAIL_CHUNK = 64 * 1024
_LINE_CHUNK = 16 * 1024  # most lines read back are a few KiB: one pread


def stream_path(root: Path, stream: str) -> Path:
    """`runs/run_01H` lives in `<root>/runs/run_01H.jsonl` (names are checked by check_stream)."""
    return root / (stream + STREAM_SUFFIX)


def list_streams(root: Path) -> Iterator[tuple[str, Path]]:
    """Every stream file below `root` as (stream name, path), in name order."""
    if not root.is_dir():
        return
    stack = [root]
    found: list[tuple[str, Path]] = []
    while stack:
        directory = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.name.endswith(STREAM_SUFFIX) and not entry.name.startswith("."):
                    path = Path(entry.path)
                    found.append((path.relative_to(root).as_posix()[: -len(STREAM_SUFFIX)], path))
    yield from sorted(found)


def last_seq_in(path: Path, stream: str) -> int | None:
    """The highest seq among the last frames of a stream file, or None if it holds none.

    Reads backwards a chunk at a time until a chunk holds a valid frame, so the cost is the
    size of the tail, not of the file. Appends write seqs in increasing order, so the last
    frame has the highest; taking the highest of the whole chunk also covers lines moved by
    hand. A torn last line (no newline) and lines that are not frames are passed over.
    """
    with path.open("rb") as handle:
        pos = handle.seek(0, os.SEEK_END)
        carry = b""  # the start-truncated first line of the previous chunk, with its newline
        while pos > 0:
            start = max(0, pos - _TAIL_CHUNK)
            handle.seek(start)
            data = handle.read(pos - start) + carry
            pos = start
            # The piece after the last newline is a torn tail (first chunk) or empty: skip it.
            parts = data.split(b"\n")[:-1]
            if start > 0 and parts:
                carry = parts[0] + b"\n"
                candidates = parts[1:]
            else:
                carry = b"" if start == 0 else data
                candidates = parts if start == 0 else []
            seqs = []
            for part in candidates:
                try:
                    seqs.append(decode_line(part, stream)[1])
                except LineError:
                    continue
            if seqs:
                return max(seqs)
        return None


def ends_torn(fd: int, size: int) -> bool:
    """True if the file behind `fd` does not end in a newline (a writer died mid-line)."""
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


class StaleOffsetError(Exception):
    """A stream file does not hold the expected frame at an offset (it was rewritten)."""


class LineReader:
    """Reads frames' lines at known offsets, keeping each stream file open while it reads."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._fds: dict[str, int] = {}

    def meta(self, stream: str, offset: int, seq: int, frame_id: str) -> dict[str, Any]:
        """The meta of frame `seq` (`frame_id`), whose line starts at `offset` of `stream`.

        StaleOffsetError if the line there is not that frame (the file was rewritten since
        the offset was recorded) or the file is gone."""
        line = self._line(stream, offset)
        try:
            found_id, found_seq, _ts, _topic, meta, _hash = decode_line(line, stream)
        except LineError:
            found_id, found_seq, meta = "", 0, {}
        if found_id != frame_id or found_seq != seq:
            raise StaleOffsetError(f"stream {stream} does not hold frame {seq} at byte {offset}")
        return meta

    def _line(self, stream: str, offset: int) -> bytes:
        fd = self._fds.get(stream)
        if fd is None:
            try:
                fd = os.open(stream_path(self._root, stream), os.O_RDONLY)
            except FileNotFoundError:
                raise StaleOffsetError(f"stream file of {stream} is gone") from None
            self._fds[stream] = fd
        parts: list[bytes] = []
        pos = offset
        while True:
            chunk = os.pread(fd, _LINE_CHUNK if not parts else len(parts[-1]) * 2, pos)
            if not chunk:  # the indexed line was complete: the file is not what it was
                raise StaleOffsetError(f"stream {stream} ends before its line at byte {offset}")
            end = chunk.find(b"\n")
            if end >= 0:
                parts.append(chunk[:end])
                return b"".join(parts)
            parts.append(chunk)
            pos += len(chunk)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
