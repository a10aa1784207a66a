"""An exclusive flock on a file, released by the kernel when its process dies: how another
process tells that the holder is alive (one loop per project, an agent session's owner)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ralph.errors import RalphError


class LockError(RalphError):
    """The lock file cannot be created."""


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (made, with its folder, if missing) for the
    block, waiting for whoever holds it now: how processes take turns at a short critical
    step (a decision written, a database made). The kernel releases it if the holder dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (closing the descriptor releases the lock)


class FileLock:
    """Held until released (and by the kernel until the process dies)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            parent = self.path.parent
            why = (f"{parent} is not a directory" if parent.exists() and not parent.is_dir()
                   else exc.strerror or str(exc))
            raise LockError(f"cannot create {self.path}: {why}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> int | None:
        """The pid the holder wrote into the lock file (None if it cannot be read)."""
        try:
            return int(self.path.read_text().strip())
        except (OSError, ValueError):
            return None

    def is_held_elsewhere(self) -> bool:
        """True if another process (or another ProjectLock here) holds the lock now."""
        return self.held_elsewhere() is True

    def held_elsewhere(self) -> bool | None:
        """Whether another process (or another FileLock here) holds the lock now; None when
        the lock file does not exist (nobody ever took it, or it was deleted)."""
        if self._fd is not None:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False
