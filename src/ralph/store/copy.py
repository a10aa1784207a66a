"""Copying a store into another, of either backend (`ralph store copy SRC DST`).

Frames keep their ids, timestamps, topics, streams, meta and content; the destination must be
empty, so that its seqs are the source's own where the source has no gaps (gc leaves gaps:
those are closed up, and the order is kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ralph.store.errors import StoreError
from ralph.store.frame import Frame
from ralph.store.store import Store

_BATCH = 500


@dataclass(frozen=True)
class CopyReport:
    frames: int
    content_objects: int
    last_seq: int


def copy_store(source: Store, target: Store,
               progress: Callable[[int, int], None] | None = None) -> CopyReport:
    """Copy every frame of `source` (with its content) into the empty `target`."""
    held = target.last_seq
    if held:
        raise StoreError(f"the destination {target.display_location} already holds frames "
                         f"(last seq {held}): copy into an empty store")
    total = source.last_seq
    copied = 0
    hashes: set[str] = set()
    batch: list[tuple[Frame, bytes | None]] = []
    last = 0

    def flush() -> None:
        nonlocal copied, last, batch
        if not batch:
            return
        done = target._import_many(batch)
        copied += len(done)
        last = done[-1].seq
        batch = []
        if progress is not None:
            progress(copied, total)

    for frame in source.read():
        data = None
        if frame.hash is not None:
            data = source.cas_get(frame.hash)
            hashes.add(frame.hash)
        batch.append((frame, data))
        if len(batch) >= _BATCH:
            flush()
    flush()
    target.flush()
    return CopyReport(copied, len(hashes), last)
