"""Small file helpers shared across Ralph: atomic replacement of a file's content."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True,
                       mode: int | None = None, follow_symlinks: bool = True) -> None:
    """Replace `path` with `data` so that readers see the old or the new file, never a mix.

    Writes a temp file beside it, fsyncs it (when `durable`), renames it over `path`, and
    fsyncs the directory. A symlink is followed (its target is replaced; with
    `follow_symlinks=False` the link itself is) and an existing file's permissions are
    kept, unless `mode` says what they are to be (set before any byte is written: a secret
    is never readable by others). Raises OSError; the temp file never outlives a failure.
    """
    if follow_symlinks and path.is_symlink():
        path = path.resolve()
    if mode is None:
        try:
            mode = path.stat(follow_symlinks=follow_symlinks).st_mode & 0o7777
        except FileNotFoundError:
            mode = None
    # os.urandom, not secrets.token_hex: the same bytes, without importing secrets (hmac,
    # random), which cost every `ralph` command a few ms at start-up.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with tmp.open("wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """(mtime, size, inode) of `path`, None if it cannot be read: a file rewritten in place
    or replaced by rename gets a new one (within the filesystem's timestamp granularity)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
