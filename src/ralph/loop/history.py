"""The loop's iteration history, a page at a time, newest first: the `iteration.finished`
frames of the store (one per iteration, whichever process ran it, recovered ones too).

A page is found without loading the history: the first page is the topic's last frames (one
index search), an older one is read backwards from its `before` bound through windows of
seqs that grow until they hold the page (frames are read in seq order only, so a window
that turns out to hold many more than the page is narrowed rather than read whole). Pages
are keyed by the store's `seq`, not by iteration number: a seq names one frame for good
(iteration numbers start again when state.json is lost), and frames appended meanwhile are
newer than every bound already handed out, so paging on while a run goes on neither
repeats nor skips an iteration.

The total is counted once and then kept up to date from the frames appended since (the
store has no count by topic), so only the first call of an `IterationHistory` reads every
frame's index entry.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ralph.store import Frame, Store

TOPIC = "iteration.finished"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# The first window below a bound: this many seqs per frame wanted (an iteration appends at
# least its start, its end and its agent's frames, usually many more).
_SEQS_PER_FRAME = 64
_GROWTH = 4  # a window that held too few grows this many times for the next one
_CAP = 4  # a window read whole holds at most this many times the frames still wanted


@dataclass(frozen=True)
class IterationPage:
    """One page of the history."""

    frames: list[Frame]
    """`iteration.finished` frames, newest first."""
    next_before: int | None
    """The `before` of the next (older) page; None when this page reaches the oldest."""
    total: int
    """Iterations recorded in all."""


def newest_before(store: Store, topic: str, before: int | None, n: int) -> list[Frame]:
    """Up to `n` frames of `topic` (exact) with a seq below `before` (None: the newest),
    newest first."""
    if n < 1:
        return []
    if before is None or before > store.last_seq:
        return store.last(topic, n)[::-1]
    found: list[Frame] = []
    upper = before  # frames below this are still to be looked at
    span = max(1, n * _SEQS_PER_FRAME)
    ceiling: int | None = None  # a span seen to hold too many frames
    while upper > 1 and len(found) < n:
        wanted = n - len(found)
        lower = max(0, upper - span)
        window = _between(store, topic, lower, upper, cap=_CAP * wanted)
        if window is None:  # many more than wanted: narrow it, and never grow back to it
            ceiling = span
            span = max(1, span // _GROWTH)
            continue
        found.extend(reversed(window[-wanted:]))
        upper = lower + 1
        span *= _GROWTH
        if ceiling is not None:
            span = min(span, max(1, ceiling // 2))
    return found


def _between(store: Store, topic: str, lower: int, upper: int, *,
             cap: int) -> list[Frame] | None:
    """The frames of `topic` with lower < seq < upper, oldest first; None when there are
    more than `cap` of them (then at most cap + 1 were read)."""
    found: list[Frame] = []
    for frame in store.read(topic=topic, after_seq=lower, limit=cap + 1):
        if frame.seq >= upper:
            return found
        found.append(frame)
    return None if len(found) > cap else found


class IterationHistory:
    """The iteration history of a project's store, for a face that serves it for a while
    (the remote API, the web monitor): pages, and the total kept from one call to the next.
    Safe to call from several threads."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._count = 0
        self._counted_to = 0  # the seq of the last frame counted
        self._oldest: int | None = None  # the oldest frame's seq when counted

    def page(self, before: int | None = None, limit: int = DEFAULT_LIMIT) -> IterationPage:
        """The `limit` (1 to MAX_LIMIT) iterations recorded before seq `before` (None: the
        newest), newest first."""
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be 1 to {MAX_LIMIT}, not {limit}")
        if before is not None and before < 0:
            raise ValueError(f"before must be a seq (0 or more), not {before}")
        frames = newest_before(self.store, TOPIC, before, limit + 1)
        more = len(frames) > limit
        frames = frames[:limit]
        return IterationPage(frames=frames, next_before=frames[-1].seq if more else None,
                             total=self.total())

    def total(self) -> int:
        """How many iterations the store records. Counted from the frames appended since
        the last call; again from the start if the oldest ones went (a retention rule)."""
        with self._lock:
            oldest = next(iter(self.store.read(topic=TOPIC, limit=1)), None)
            oldest_seq = oldest.seq if oldest is not None else None
            if oldest_seq != self._oldest:
                self._count, self._counted_to, self._oldest = 0, 0, oldest_seq
            for frame in self.store.read(topic=TOPIC, after_seq=self._counted_to):
                self._count += 1
                self._counted_to = frame.seq
            return self._count


def iteration_page(store: Store, before: int | None = None,
                   limit: int = DEFAULT_LIMIT) -> IterationPage:
    """One page of `store`'s iteration history (see IterationHistory.page), counting the
    total from scratch: a caller that pages on keeps an IterationHistory instead."""
    return IterationHistory(store).page(before, limit)


STARTED_TOPIC = "iteration.started"


def unfinished_iteration(store: Store) -> Frame | None:
    """The `iteration.started` frame of the newest iteration if it has not finished (no
    `iteration.finished` after it), else None: what a run is doing now, for a face that
    opens in its middle. A run that died leaves one too: ask only while a run is active."""
    started = store.last(STARTED_TOPIC, 1)
    if not started:
        return None
    finished = store.last(TOPIC, 1)
    if finished and finished[0].seq > started[0].seq:
        return None
    return started[0]
