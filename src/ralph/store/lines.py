"""Incremental reading of append-only line files (JSONL): where a reader stopped in a file
(a `FileCursor`), whether the file is still the one it read (`replaced_or_shrunk`), and the
complete lines appended since (`complete_lines`).

A line counts only once its newline is written: a trailing piece without one is left for
the next read, because a writer may be writing it right now (a crashed writer's torn line is
closed by the next append). Both of Ralph's indexes over line files use this: the event
store's index (`ralph.store.index`) and the AgentCompany index over runs' `events.jsonl`
(`ralph.company.index_sync`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

READ_CHUNK = 4 * 1024 * 1024
MARK_WINDOW = 4096  # bytes before the offset a mark covers (a line or more)


@dataclass(frozen=True)
class FileCursor:
    """How far a reader got in a file: `offset` (just after a newline, or 0) in the file with
    inode `ino`. `mark` (optional) is a digest of the bytes just before `offset` (read_mark),
    so that a file whose last lines were rewritten in place (same inode, not shorter) is
    noticed too."""

    offset: int
    ino: int
    mark: bytes = b""


def replaced_or_shrunk(cursor: FileCursor, st: os.stat_result,
                       fd: int | None = None) -> str | None:
    """Why the file (`st`, open as `fd` if given) is no longer what `cursor` read: "replaced"
    (another inode), "shrunk" (shorter than the offset), "rewritten" (the bytes before the
    offset changed; only checked with a mark and an fd), or None if it only grew or stayed."""
    if cursor.ino != st.st_ino:
        return "replaced"
    if st.st_size < cursor.offset:
        return "shrunk"
    if cursor.mark and fd is not None and read_mark(fd, cursor.offset) != cursor.mark:
        return "rewritten"
    return None


def read_mark(fd: int, offset: int) -> bytes:
    """A digest of the (up to) MARK_WINDOW bytes before `offset` of the file open as `fd`."""
    start = max(0, offset - MARK_WINDOW)
    return hashlib.blake2b(os.pread(fd, offset - start, start), digest_size=16).digest()


def line_end(start: int, line: bytes) -> int:
    """The offset just after a line `complete_lines` yielded (past its newline)."""
    return start + len(line) + 1


def complete_lines(handle: BinaryIO, offset: int, size: int,
                   on_chunk: Callable[[int], None] | None = None,
                   chunk_size: int = READ_CHUNK) -> Iterator[tuple[int, bytes]]:
    """(start offset, line without its newline) of every complete line in [offset, size) of
    `handle`, blank ones included, read `chunk_size` bytes at a time (memory stays bounded
    whatever the file's size). A piece after the last newline is not yielded. `on_chunk`
    gets the size of each chunk read, after its lines are yielded (progress)."""
    handle.seek(offset)
    pos = offset
    carry = b""
    remaining = size - offset
    while remaining > 0:
        chunk = handle.read(min(chunk_size, remaining))
        if not chunk:
            break
        remaining -= len(chunk)
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
        else:
            carry = data[cut + 1:]
            for line in data[:cut].split(b"\n"):
                yield pos, line
                pos += len(line) + 1
        if on_chunk is not None:
            on_chunk(len(chunk))
