"""Reading one file of the repository for a client (`file/get`): confined (see
`ralph.repo.paths`), regular files only, at most `MAX_FILE_BYTES`, text or base64.

The path is resolved first, then opened one component at a time from the root with
`O_NOFOLLOW` (each directory with `O_DIRECTORY`): a symlink put in place of any component
after the check is refused rather than followed, so nothing outside the root is read even
when the tree changes meanwhile. The last component is looked at (`lstat`) before it is
opened, and opened only when it is a regular file (`O_NONBLOCK` besides, should it turn into
a FIFO meanwhile; the opened file is checked again): a FIFO or a device is never opened.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ralph.repo.errors import FileNotFound
from ralph.repo.paths import confine, real_root

__all__ = ["MAX_FILE_BYTES", "FileContent", "get_file", "read_file"]

MAX_FILE_BYTES = 10 * 1024 * 1024
_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY

Encoding = Literal["utf-8", "base64"]


@dataclass(frozen=True)
class FileContent:
    """A file's content: `content` holds its first `MAX_FILE_BYTES` at most (`truncated`
    when there is more), as text when they are UTF-8 without NUL, else base64; `size` is the
    whole file's size."""

    path: str
    content: str
    size: int
    truncated: bool
    encoding: Encoding


def read_file(root: Path, path: str, *, max_bytes: int = MAX_FILE_BYTES) -> FileContent:
    """The regular file `path` (relative to `root`) names; FileNotFound for anything else
    (see `confine`). Blocking: `get_file` runs it in a thread."""
    if max_bytes < 0:
        raise ValueError("max_bytes must not be negative")
    relative = confine(root, path)
    if not relative:
        raise FileNotFound(path, "a directory")
    fd = _open_regular(real_root(root), relative, path)
    try:
        size = os.fstat(fd).st_size
        data = _read(fd, max_bytes + 1)
    except OSError as exc:
        raise FileNotFound(path, f"cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    truncated = len(data) > max_bytes or size > max_bytes
    del data[max_bytes:]
    content, encoding = _encode(bytes(data), truncated)
    return FileContent(path=path, content=content, size=max(size, len(data)),
                       truncated=truncated, encoding=encoding)


async def get_file(root: Path, path: str, *, max_bytes: int = MAX_FILE_BYTES) -> FileContent:
    """`read_file` off the event loop."""
    return await asyncio.to_thread(read_file, root, path, max_bytes=max_bytes)


def _open_regular(base: str, relative: str, path: str) -> int:
    """An fd of the regular file `relative` below `base`, reached without following any
    symlink."""
    *parents, name = relative.split("/")
    try:
        directory = os.open(base, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        raise FileNotFound(path, f"the repository cannot be opened: {exc.strerror}") from None
    try:
        for part in parents:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=directory)
            except OSError as exc:
                raise FileNotFound(path, _why(exc)) from None
            os.close(directory)
            directory = inner
        try:
            before = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except OSError as exc:
            raise FileNotFound(path, _why(exc)) from None
        if not stat.S_ISREG(before.st_mode):
            raise FileNotFound(path, "not a regular file")
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=directory)
        except OSError as exc:
            raise FileNotFound(path, _why(exc)) from None
    finally:
        os.close(directory)
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
            before.st_dev, before.st_ino):
        os.close(fd)
        raise FileNotFound(path, "changed while being opened")
    return fd


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symlink appeared along the path"
    if exc.errno == errno.ENOTDIR:  # O_DIRECTORY | O_NOFOLLOW on a symlink says this too
        return "a file or a symlink where a directory should be"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return exc.strerror or str(exc)


def _read(fd: int, limit: int) -> bytearray:
    data = bytearray()
    while len(data) < limit:
        chunk = os.read(fd, min(_CHUNK, limit - len(data)))
        if not chunk:
            break
        data += chunk
    return data


def _encode(data: bytes, truncated: bool) -> tuple[str, Encoding]:
    """UTF-8 text without NUL as itself; anything else as base64. A cut (truncated) text
    loses the incomplete character at its end rather than turning into base64."""
    if b"\0" not in data:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError as exc:
            if truncated and exc.reason == "unexpected end of data":
                try:
                    return data[:exc.start].decode("utf-8"), "utf-8"
                except UnicodeDecodeError:
                    pass
    return base64.b64encode(data).decode("ascii"), "base64"
