"""Small file-system helpers shared by the store's writers: errno mapping and directory fsync."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ralph.store.errors import StoreError, StoreFullError, StoreNotWritableError, StoreWriteError

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NOT_WRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENOENT,
                 errno.EEXIST}


def write_error(exc: OSError, what: str) -> StoreError:
    """Map an OSError raised while writing `what` to the store's exception for it."""
    reason = exc.strerror or str(exc)
    if exc.errno in _FULL:
        return StoreFullError(f"disk full while writing {what}: {reason}")
    if exc.errno in _NOT_WRITABLE:
        return StoreNotWritableError(f"cannot write {what}: {reason}")
    return StoreWriteError(f"I/O error while writing {what}: {reason}")


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written (a short write is retried, an error raised)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
