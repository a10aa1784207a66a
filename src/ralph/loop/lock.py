"""One loop per project at a time: an exclusive flock on `.ralph/loop.lock`."""

from __future__ import annotations

from ralph.flock import FileLock, LockError
from ralph.loop.errors import LoopError


class ProjectLock(FileLock):
    """Held for the whole of a step or run; released on close (and by the kernel if the
    process dies, which is how a later start knows an in-flight iteration was interrupted)."""

    def try_acquire(self) -> bool:
        try:
            return super().try_acquire()
        except LockError as exc:
            raise LoopError(str(exc)) from None
