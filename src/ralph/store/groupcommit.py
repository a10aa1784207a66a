"""Group commit for durability `batch`: fsync what was written at most every N milliseconds."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger("ralph.store")


class GroupCommit:
    """A background thread that fsyncs dirty streams (and pending content) in batches.

    `collect` runs under the writer's mutex and returns duplicated descriptors of what is
    dirty plus the content paths to sync; the fsyncs themselves run outside the mutex, on the
    duplicates, so appends go on meanwhile and a descriptor the writer closes stays valid.
    """

    def __init__(self, interval_s: float, mutex: threading.Lock,
                 collect: Callable[[], tuple[list[int], Callable[[], None]]]) -> None:
        self._interval = interval_s
        self._mutex = mutex
        self._collect = collect
        self._wanted = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        """Something was written: commit it within the interval (cheap when already asked)."""
        if self._wanted.is_set():
            return
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="ralph-store-fsync",
                                            daemon=True)
            self._thread.start()
        self._wanted.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wanted.wait()
            self._stopping.wait(self._interval)
            if self._stopping.is_set():
                return
            self._wanted.clear()
            try:
                with self._mutex:
                    fds, sync_content = self._collect()
                try:
                    sync_content()  # content before the frames that name it
                finally:
                    sync_and_close(fds)  # the descriptors are ours: never left open
            except Exception as exc:  # the thread must outlive a failed fsync
                log.warning("group commit failed (%s); retrying at the next interval", exc)

    def stop(self) -> None:
        self._stopping.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def sync_and_close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.fdatasync(fd)
        with contextlib.suppress(OSError):
            os.close(fd)


def dup_for_sync(fds: list[int]) -> list[int]:
    """Duplicates to fsync outside the mutex; a descriptor that cannot be duplicated (out of
    descriptors) is synced right away instead."""
    dups = []
    for fd in fds:
        try:
            dups.append(os.dup(fd))
        except OSError:
            with contextlib.suppress(OSError):
                os.fdatasync(fd)
    return dups
