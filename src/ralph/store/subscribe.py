"""Live subscriptions: replay from the index, then live frames, with no gap and no duplicate.

Each event loop that subscribes gets one Hub. The hub wakes when this process appends or when
the store's backend says another process appended (the file store's head file changed, a
PostgreSQL notification came), brings the store up to date, and pushes each new frame once to
every live subscriber's bounded buffer. A subscriber starts in replay mode, paging through the
index from its cursor; it turns live only when it has read everything the hub has pushed so
far, which the hub cannot change behind its back because both run on the same event loop. A
subscriber whose buffer overflows drops the buffer and goes back to replay from its cursor:
memory stays bounded and no frame is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from ralph.store.errors import StoreError
from ralph.store.frame import Frame
from ralph.store.index import TopicQuery

if TYPE_CHECKING:
    from ralph.store.store import Store

log = logging.getLogger("ralph.store")

PAGE = 500
_MAX_FAILURES = 8  # consecutive failed refreshes (about 20 s of retrying) before giving up


@dataclass(frozen=True)
class Lag:
    """Told to a subscriber that fell behind: `dropped` buffered frames were let go and will be
    read again from the index, after `resume_after`."""

    dropped: int
    resume_after: int


class Subscription:
    """An async iterator of frames; close it (or use `async with`) when done."""

    def __init__(self, store: Store, topic: TopicQuery | None, stream: str | None,
                 after_seq: int, max_buffer: int, on_lag: Callable[[Lag], None] | None) -> None:
        self._store = store
        self._topic = topic
        self._stream = stream
        self.cursor = after_seq  # the seq of the last frame delivered (or skipped past)
        self._max_buffer = max_buffer
        self._on_lag = on_lag
        self._buffer: deque[Frame] = deque()
        self._live = False
        self._wake = asyncio.Event()
        self._hub: Hub | None = None
        self._closed = False
        self._error: StoreError | None = None
        self.lags = 0

    def matches(self, frame: Frame) -> bool:
        return (self._topic is None or self._topic.matches(frame.topic)) and (
            self._stream is None or frame.stream == self._stream)

    # -- called by the hub, on the event loop ------------------------------------------------

    def offer(self, frame: Frame) -> None:
        if frame.seq <= self.cursor or not self.matches(frame):
            return
        if len(self._buffer) >= self._max_buffer:
            self._fall_behind()
            return
        self._buffer.append(frame)
        self._wake.set()

    def _fall_behind(self) -> None:
        lag = Lag(dropped=len(self._buffer), resume_after=self.cursor)
        self._buffer.clear()
        self._live = False
        if self._hub is not None:
            self._hub.live.discard(self)
        self.lags += 1
        log.warning("a subscriber fell %d frames behind; it resumes from the index after seq %d",
                    lag.dropped, lag.resume_after)
        if self._on_lag is not None:
            self._on_lag(lag)
        self._wake.set()

    # -- the iterator ----------------------------------------------------------------------

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Frame:
        while True:
            if self._error is not None:
                raise self._error
            if self._closed:
                raise StopAsyncIteration
            while self._buffer:
                frame = self._buffer.popleft()
                if frame.seq > self.cursor:
                    self.cursor = frame.seq
                    return frame
            if self._hub is None:
                self._hub = await self._store._hub()
                self._hub.subscribers.add(self)
            if self._live:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._replay_page(self._hub)

    async def _replay_page(self, hub: Hub) -> None:
        """Read the next page from the index; go live once caught up with the hub."""
        upto = hub.pushed_upto
        limit = min(PAGE, self._max_buffer)
        frames = await asyncio.to_thread(
            self._store._page,
            topic=self._topic, stream=self._stream, after_seq=self.cursor, upto=upto,
            limit=limit)
        if self._closed:
            return
        self._buffer.extend(frames)
        # No await since `upto` was read unless the hub moved on: if it did not, everything
        # matching up to `upto` is buffered or delivered, and the hub pushes only what follows.
        if len(frames) < limit and hub.pushed_upto == upto:
            self._live = True
            hub.live.add(self)

    def fail(self, error: StoreError) -> None:
        """End this subscription with an error (the hub could not read the store any more)."""
        self._error = error
        self.close()

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._buffer.clear()
        self._wake.set()
        if self._hub is not None:
            self._hub.remove(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()


class Hub:
    """Fans new frames out to the subscriptions of one event loop."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop, start_seq: int) -> None:
        self._store = store
        self.loop = loop
        self.subscribers: set[Subscription] = set()
        self.live: set[Subscription] = set()
        self.pushed_upto = start_seq
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks = [loop.create_task(self._run(), name="ralph-store-hub"),
                       loop.create_task(store._watch_appends(self._wake.set, self._stop),
                                        name="ralph-store-watch")]

    def notify(self) -> None:
        """Thread-safe: something was appended."""
        if not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            await self._wake.wait()
            self._wake.clear()
            try:
                watermark = await asyncio.to_thread(self._store.refresh)
                while self.pushed_upto < watermark and not self._stop.is_set():
                    if not self.live:
                        self.pushed_upto = watermark
                        break
                    frames = await asyncio.to_thread(
                        self._store._page,
                        after_seq=self.pushed_upto, upto=watermark, limit=PAGE)
                    for frame in frames:
                        for sub in list(self.live):
                            sub.offer(frame)
                    self.pushed_upto = frames[-1].seq if len(frames) == PAGE else watermark
            except Exception as exc:  # a passing failure (a locked index) is retried
                failures += 1
                if failures >= _MAX_FAILURES:
                    self._fail(exc)
                    return
                delay = min(0.1 * 2**failures, 5.0)
                log.warning("store subscription could not read new frames (%s); retrying in "
                            "%.1f s", exc, delay)
                await asyncio.sleep(delay)
                self._wake.set()
            else:
                failures = 0

    def _fail(self, exc: Exception) -> None:
        """Give up: every subscriber's next step raises the error, instead of waiting forever."""
        error = exc if isinstance(exc, StoreError) else StoreError(
            f"store subscription failed: {exc}")
        for sub in list(self.subscribers):
            sub.fail(error)
        self.close()

    def remove(self, sub: Subscription) -> None:
        self.subscribers.discard(sub)
        self.live.discard(sub)
        if not self.subscribers:
            self.close()

    def close(self) -> None:
        """Stop watching; every subscription of this hub ends."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._wake.set()
        self._store._drop_hub(self)
        for sub in list(self.subscribers):
            sub.close()
        for task in self._tasks:
            task.cancel()
