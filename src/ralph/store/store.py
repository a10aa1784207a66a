"""The Store: the one API of the event log, whichever backend holds it.

`Store(location)` opens the store at `location`: a directory (FileStore: JSONL streams, a
content directory and a SQLite index, the default) or a `postgresql://` URL (PostgresStore:
one database shared by every machine of a team). Both keep the same contract: frames with a
gapless store-wide `seq`, content by sha256, retention by explicit gc, and subscriptions that
replay then go live with no gap. What is common to both (argument checks, paging, the
subscription hubs) lives here; each backend supplies storage and change notification.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ralph.store.errors import (
    FrameNotFoundError,
    InvalidContentError,
    InvalidQueryError,
    StoreError,
)
from ralph.store.frame import (
    DEFAULT_STREAM,
    Frame,
    check_stream,
    check_topic,
    encode_meta,
    format_ts,
    parse_ts_ms,
    topic_filter,
)
from ralph.store.index import TopicQuery
from ralph.store.location import is_database_url

# Subscriptions (asyncio, watchfiles: a fifth of a `ralph notes list`) are imported by the
# first subscribe(): most commands that open a store only read it.
if TYPE_CHECKING:
    import asyncio

    from ralph.store.index import ParseError, Progress, SyncResult
    from ralph.store.retention import GcReport, Rule
    from ralph.store.subscribe import Hub, Lag, Subscription
    from ralph.store.writer import Durability

_PAGE = 1000
_VALID_NAMES_CACHE = 4096
_MAX_SQL_INT = 2**63 - 1


@dataclass(frozen=True)
class Draft:
    """A frame to append with `append_many`: what `append` takes, as one value."""

    topic: str
    meta: dict[str, Any] | None = None
    content: bytes | str | None = None
    stream: str = DEFAULT_STREAM


class Store:
    """An append-only event log; `Store(location, ...)` opens the backend `location` names.

    Keyword options: `durability` (always, batch, never), `batch_interval_ms`, `max_lag` (a
    subscriber's buffer), `sync_on_open` and `create` (False: a reader that finds no store
    reads it as empty and creates nothing).
    """

    def __new__(cls, location: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Store:
        if cls is Store:
            if is_database_url(location):
                from ralph.store.postgres import PostgresStore  # noqa: PLC0415 - psycopg

                return super().__new__(PostgresStore)
            from ralph.store.filestore import FileStore  # noqa: PLC0415 - cycle

            return super().__new__(FileStore)
        return super().__new__(cls)

    def __init__(self, location: str | os.PathLike[str], *, durability: Durability = "batch",
                 batch_interval_ms: int = 20, max_lag: int = 10_000,
                 sync_on_open: bool = True, create: bool = True) -> None:
        from ralph.store.writer import DURABILITY_MODES  # noqa: PLC0415 - one tuple

        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITY_MODES)}")
        if max_lag < 1:
            raise ValueError("max_lag must be at least 1")
        self.durability = durability
        self.max_lag = max_lag
        self._valid_topics: set[str] = set()
        self._valid_streams: set[str] = set()
        self._hubs: dict[asyncio.AbstractEventLoop, Hub] = {}
        self._hubs_lock = threading.Lock()

    # -- what a backend supplies -------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the store is, as `--store` or $RALPH_STORE would name it (a URL keeps its
        password: agents and workers are given it to open the same store)."""
        raise NotImplementedError

    @property
    def display_location(self) -> str:
        """`location` fit to print: a URL's password is masked."""
        return self.location

    @property
    def exists(self) -> bool:
        """False while a `create=False` store does not exist."""
        raise NotImplementedError

    def append(self, topic: str, meta: dict[str, Any] | None = None,
               content: bytes | str | None = None, stream: str = DEFAULT_STREAM) -> Frame:
        """Append one frame; `content` (if any) goes to the content store, named by `hash`."""
        raise NotImplementedError

    def append_many(self, drafts: Iterable[Draft]) -> list[Frame]:
        """Append several frames in order, with consecutive seqs where the backend can batch
        them (PostgreSQL: one transaction); here, one append after another."""
        return [self.append(d.topic, d.meta, d.content, d.stream) for d in drafts]

    def _import_many(self, frames: list[tuple[Frame, bytes | None]]) -> list[Frame]:
        """Append copies of frames from another store, keeping their ids, timestamps, meta
        and content (ralph.store.copy); the seqs are this store's next ones."""
        raise NotImplementedError

    def refresh(self) -> int:
        """Make what was appended elsewhere readable; return the watermark (the seq up to
        which every frame is readable)."""
        raise NotImplementedError

    def sync(self, progress: Progress | None = None) -> SyncResult:
        """Index everything appended since the last sync (what reads do implicitly)."""
        raise NotImplementedError

    def rebuild(self, progress: Progress | None = None) -> SyncResult:
        """Recreate the index from the frames' own record."""
        raise NotImplementedError

    def get(self, frame_id: str) -> Frame:
        """The frame with this id; FrameNotFoundError if there is none."""
        # A SCRU128 id is ASCII; anything else (undecodable bytes from argv) cannot name one.
        frame = self._lookup(frame_id) if frame_id.isascii() else None
        if frame is None:
            raise FrameNotFoundError(f"no frame with id {frame_id!r}")
        return frame

    def _lookup(self, frame_id: str) -> Frame | None:
        """The frame with this id, or None (the store may not exist yet)."""
        raise NotImplementedError

    def _page(self, *, topic: TopicQuery | None = None, stream: str | None = None,
              after_seq: int = 0, upto: int | None = None, since: str | None = None,
              until: str | None = None, limit: int = 1000, newest_first: bool = False
              ) -> list[Frame]:
        """Frames with after_seq < seq <= upto matching the filters, in seq order (newest
        first if asked); none while the store does not exist."""
        raise NotImplementedError

    def cas_get(self, hash_: str) -> bytes:
        """Content by its SRI hash, verified against it."""
        raise NotImplementedError

    def errors(self) -> list[ParseError]:
        """What the store holds that is not a frame (skipped, never dropped silently)."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    def gc(self, rules: list[Rule] | None = None, *, dry_run: bool = False) -> GcReport:
        """Apply the store's retention rules, then `rules` (which win ties)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Make everything appended so far durable, whatever the durability setting."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    async def _watch_appends(self, wake: Callable[[], None], stop: asyncio.Event) -> None:
        """Call `wake` whenever another process may have appended, until `stop` is set."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------

    def _prepare(self, topic: str, meta: dict[str, Any] | None, content: bytes | str | None,
                 stream: str) -> tuple[bytes, bytes | None]:
        """Check a frame to append: its meta as JSON and its content as bytes."""
        if topic not in self._valid_topics:
            check_topic(topic)
            if len(self._valid_topics) < _VALID_NAMES_CACHE:
                self._valid_topics.add(topic)
        if stream not in self._valid_streams:
            check_stream(stream)
            if len(self._valid_streams) < _VALID_NAMES_CACHE:
                self._valid_streams.add(stream)
        meta_json = encode_meta(meta)
        try:
            data = content.encode() if isinstance(content, str) else content
        except UnicodeEncodeError as exc:
            raise InvalidContentError(f"content is not valid text: {exc.reason} at character "
                                      f"{exc.start}") from None
        return meta_json, data

    def _appended(self) -> None:
        """Wake this process's subscription hubs: a frame was appended."""
        for hub in list(self._hubs.values()):
            hub.notify()

    def last(self, topic: str, n: int = 1) -> list[Frame]:
        """The last `n` frames of a topic (or `prefix.*`), oldest first."""
        check_count("n", n, minimum=1)
        query = TopicQuery(*topic_filter(topic))
        upto = self.refresh()
        frames = self._page(topic=query, upto=upto, limit=n, newest_first=True)
        return frames[::-1]

    def read(self, topic: str | None = None, stream: str | None = None,
             after_seq: int | None = None, limit: int | None = None,
             since: datetime | str | None = None, until: datetime | str | None = None
             ) -> Iterator[Frame]:
        """Frames in seq order matching every filter given, read lazily page by page.

        `topic` is exact or a prefix wildcard (`ralph.auth.*`); `since`/`until` bound `ts`
        (inclusive/exclusive). The read stops at the watermark taken when it starts.
        """
        query = None if topic is None else TopicQuery(*topic_filter(topic))
        if stream is not None:
            check_stream(stream)
        if limit is not None:
            check_count("limit", limit)
        if after_seq is not None:
            check_count("after_seq", after_seq)
        bounds = (_ts_bound(since), _ts_bound(until))
        upto = self.refresh()
        return self._pages(query, stream, after_seq or 0, limit, upto, *bounds)

    def _pages(self, query: TopicQuery | None, stream: str | None, cursor: int,
               limit: int | None, upto: int, since: str | None, until: str | None
               ) -> Iterator[Frame]:
        left = limit
        while left is None or left > 0:
            size = _PAGE if left is None else min(_PAGE, left)
            frames = self._page(topic=query, stream=stream, after_seq=cursor, upto=upto,
                                since=since, until=until, limit=size)
            yield from frames
            if len(frames) < size:
                return
            cursor = frames[-1].seq
            if left is not None:
                left -= len(frames)

    @property
    def last_seq(self) -> int:
        """The seq up to which every frame is readable."""
        return self.refresh()

    def subscribe(self, topic: str | None = None, stream: str | None = None,
                  after_seq: int | None = None, *, on_lag: Callable[[Lag], None] | None = None
                  ) -> Subscription:
        """Frames after `after_seq` (all when None) from the index, then live ones as they come.

        Use it as `async for frame in store.subscribe(...)` inside `async with`, or close it.
        """
        from ralph.store.subscribe import Subscription  # noqa: PLC0415 - see the imports

        query = None if topic is None else TopicQuery(*topic_filter(topic))
        if stream is not None:
            check_stream(stream)
        if after_seq is not None:
            check_count("after_seq", after_seq)
        return Subscription(self, query, stream, after_seq or 0, self.max_lag, on_lag)

    async def _hub(self) -> Hub:
        import asyncio  # noqa: PLC0415 - see the imports

        from ralph.store.subscribe import Hub  # noqa: PLC0415

        loop = asyncio.get_running_loop()
        hub = self._hubs.get(loop)
        if hub is not None:
            return hub
        watermark = await asyncio.to_thread(self.refresh)
        with self._hubs_lock:
            hub = self._hubs.get(loop)
            if hub is None:
                hub = Hub(self, loop, watermark)
                self._hubs[loop] = hub
        return hub

    def _drop_hub(self, hub: Hub) -> None:
        with self._hubs_lock:
            if self._hubs.get(hub.loop) is hub:
                del self._hubs[hub.loop]

    def _close_hubs(self) -> None:
        """End every subscription (on the loop each runs on)."""
        for hub in list(self._hubs.values()):
            if hub.loop.is_running() and _running_loop() is not hub.loop:
                hub.loop.call_soon_threadsafe(hub.close)
            else:
                hub.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    import asyncio  # noqa: PLC0415 - see the imports

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def check_count(name: str, value: int, minimum: int = 0) -> None:
    """A seq, limit or count must fit a 64-bit integer (and make sense)."""
    if not minimum <= value <= _MAX_SQL_INT:
        raise InvalidQueryError(f"{name} must be between {minimum} and {_MAX_SQL_INT}")


def _ts_bound(value: datetime | str | None) -> str | None:
    """A `since`/`until` bound as a frame timestamp, so that it compares as text."""
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value.isoformat()
    try:
        return format_ts(parse_ts_ms(value))
    except ValueError as exc:
        raise InvalidQueryError(str(exc)) from None


def closed_error() -> StoreError:
    return StoreError("the store is closed")
