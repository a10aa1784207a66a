"""The Store: the public face of the event log (append, read, subscribe, content, upkeep)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import orjson

from ralph.store.cas import ContentStore
from ralph.store.errors import (
    FrameNotFoundError,
    InvalidContentError,
    InvalidQueryError,
    StoreError,
    StoreNotWritableError,
)
from ralph.store.frame import (
    DEFAULT_STREAM,
    Frame,
    check_stream,
    check_topic,
    digest_from_sri,
    encode_meta,
    format_ts,
    parse_ts_ms,
    topic_filter,
)
from ralph.store.head import Head
from ralph.store.index import Index, ParseError, Progress, SyncResult, TopicQuery
from ralph.store.retention import GcReport, Rule, collect_garbage, load_rules
from ralph.store.writer import DURABILITY_MODES, Durability, Writer

# Subscriptions (asyncio, watchfiles: a fifth of a `ralph notes list`) are imported by the
# first subscribe(): most commands that open a store only read it.
if TYPE_CHECKING:
    import asyncio

    from ralph.store.subscribe import Hub, Lag, Subscription

_PAGE = 1000
_VALID_NAMES_CACHE = 4096
_NOTHING_SYNCED = SyncResult(0, 0, 0, 0)


@dataclass(frozen=True)
class _Files:
    """What an opened store holds open: the append path and the index."""

    writer: Writer
    index: Index


_EMPTY_COUNTS = {"frames": 0, "streams": 0, "topics": 0, "parse_errors": 0, "watermark": 0}


class Store:
    """An append-only event log in a directory.

    Layout: `streams/<stream>.jsonl` (the truth), `cas/` (content by sha256), `index.sqlite`
    (a cache over all streams), `head` (the append lock and the last seq). Safe to use from
    several threads and several processes at once.

    `create=False` is for readers: a store whose directory does not exist reads as empty and
    is not created (a path that cannot be a store, such as a file, is still an error); it is
    opened when it appears (another process's first append) or when this Store appends to
    it, so that commands that only look never leave a `.ralph/store` behind.
    """

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "batch",
                 batch_interval_ms: int = 20, max_lag: int = 10_000,
                 sync_on_open: bool = True, create: bool = True) -> None:
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITY_MODES)}")
        if max_lag < 1:
            raise ValueError("max_lag must be at least 1")
        self.path = Path(path)
        self.durability = durability
        self.max_lag = max_lag
        self._batch_interval_ms = batch_interval_ms
        self._sync_on_open = sync_on_open
        self._cas = ContentStore(self.path / "cas", sync_writes=durability == "always")
        self._valid_topics: set[str] = set()
        self._valid_streams: set[str] = set()
        self._hubs: dict[asyncio.AbstractEventLoop, Hub] = {}
        self._hubs_lock = threading.Lock()
        # (head bytes, watermark) of the last sync: one tuple, so threads never see a mix.
        self._synced: tuple[bytes, int] | None = None
        self._files: _Files | None = None
        self._open_lock = threading.Lock()
        self._closed = False
        if create or not _missing(self.path):
            self._files = self._open()

    def _open(self) -> _Files:
        """Create what is missing of the store's layout and open its files."""
        streams_root = self.path / "streams"
        try:
            streams_root.mkdir(parents=True, exist_ok=True)
            (self.path / "cas").mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreNotWritableError(
                f"cannot create the store at {self.path}: {exc.strerror}") from None
        writer = Writer(self.path, self._cas, self.durability, self._batch_interval_ms)
        index = Index(self.path / "index.sqlite", streams_root)
        files = _Files(writer, index)
        try:
            writer.settle()  # closes a torn tail left by a writer that died
            index.open()
            if self._sync_on_open:  # records a torn tail found above, and whatever else is new
                self._sync(files, writer.peek_head())
        except BaseException:
            writer.close()
            index.close()
            raise
        return files

    def _opened(self) -> _Files | None:
        """The open files; None while a `create=False` store does not exist."""
        files = self._files
        if files is not None:
            return files
        if self._closed:
            raise StoreError("the store is closed")
        if _missing(self.path):
            return None
        return self._open_once()

    def _for_writing(self) -> _Files:
        """The open files, creating the store if it does not exist yet."""
        files = self._files
        if files is not None:
            return files
        if self._closed:
            raise StoreError("the store is closed")
        return self._open_once()

    def _open_once(self) -> _Files:
        with self._open_lock:
            if self._closed:  # closed by another thread meanwhile: open nothing any more
                raise StoreError("the store is closed")
            if self._files is None:
                self._files = self._open()
            return self._files

    @property
    def exists(self) -> bool:
        """False while a `create=False` store's directory does not exist."""
        return self._opened() is not None

    # -- writing ----------------------------------------------------------------------------

    def append(self, topic: str, meta: dict[str, Any] | None = None,
               content: bytes | str | None = None, stream: str = DEFAULT_STREAM) -> Frame:
        """Append one frame; `content` (if any) goes to the content store, named by `hash`."""
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
        writer = (self._files or self._for_writing()).writer
        hash_ = None if data is None else self._cas.put(data)
        done = writer.append(topic, stream, meta_json, hash_, data)
        for hub in list(self._hubs.values()):
            hub.notify()
        return Frame(id=done.id, seq=done.seq, ts=done.ts, topic=topic,
                                     stream=stream, meta=orjson.loads(meta_json), hash=hash_)

    # -- reading ----------------------------------------------------------------------------

    def refresh(self) -> int:
        """Bring the index up to date if anything was appended; return the watermark.

        Cheap when nothing changed: one read of the head. When the index shows a gap (a frame
        still being written by another process) it waits for in-flight appends and syncs again,
        so readers always see a gapless prefix of the log.
        """
        files = self._opened()
        if files is None:
            return 0
        raw = files.writer.peek_head()
        synced = self._synced
        if synced is not None and synced[0] == raw:
            return synced[1]
        return self._sync(files, raw).watermark

    def sync(self, progress: Progress | None = None) -> SyncResult:
        """Index everything appended since the last sync (what reads do implicitly).

        `progress(done, total)` is called with the bytes read so far.
        """
        files = self._opened()
        if files is None:
            return _NOTHING_SYNCED
        return self._sync(files, files.writer.peek_head(), progress)

    def _sync(self, files: _Files, raw: bytes, progress: Progress | None = None) -> SyncResult:
        head = Head.decode(raw)
        result = files.index.sync(progress=progress)
        if result.max_seq > result.watermark or (head is not None
                                                 and result.watermark < head.seq):
            last, raw = files.writer.settle()
            result = files.index.sync(settle_upto=last)
        self._synced = (raw, result.watermark)
        return result

    def rebuild(self, progress: Progress | None = None) -> SyncResult:
        """Recreate the index from the stream files."""
        files = self._opened()
        if files is None:
            return _NOTHING_SYNCED
        rebuilt = files.index.rebuild(progress)
        synced = self._sync(files, files.writer.peek_head())
        return SyncResult(rebuilt.frames + synced.frames, rebuilt.errors + synced.errors,
                          synced.watermark, synced.max_seq)

    def get(self, frame_id: str) -> Frame:
        """The frame with this id; FrameNotFoundError if there is none."""
        self.refresh()
        files = self._opened()
        # A SCRU128 id is ASCII; anything else (undecodable bytes from argv) cannot name one.
        frame = files.index.get(frame_id) if files is not None and frame_id.isascii() else None
        if frame is None:
            raise FrameNotFoundError(f"no frame with id {frame_id!r}")
        return frame

    def last(self, topic: str, n: int = 1) -> list[Frame]:
        """The last `n` frames of a topic (or `prefix.*`), oldest first."""
        _check_count("n", n, minimum=1)
        query = TopicQuery(*topic_filter(topic))
        upto = self.refresh()
        frames = self._page(topic=query, upto=upto, limit=n, newest_first=True)
        return frames[::-1]

    def _page(self, *, topic: TopicQuery | None = None, stream: str | None = None,
              after_seq: int = 0, upto: int | None = None, since: str | None = None,
              until: str | None = None, limit: int = 1000, newest_first: bool = False
              ) -> list[Frame]:
        """One page of the index (see Index.page); none while the store does not exist."""
        files = self._opened()
        if files is None:
            return []
        return files.index.page(topic=topic, stream=stream, after_seq=after_seq, upto=upto,
                                since=since, until=until, limit=limit,
                                newest_first=newest_first)

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
            _check_count("limit", limit)
        if after_seq is not None:
            _check_count("after_seq", after_seq)
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

    def cas_get(self, hash_: str) -> bytes:
        """Content by its SRI hash, verified against it."""
        digest_from_sri(hash_)
        return self._cas.get(hash_)

    @property
    def last_seq(self) -> int:
        """The seq up to which every frame is readable."""
        return self.refresh()

    # -- live -------------------------------------------------------------------------------

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
            _check_count("after_seq", after_seq)
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

    # -- upkeep -----------------------------------------------------------------------------

    def errors(self) -> list[ParseError]:
        """Lines of the stream files that are not frames (skipped, never dropped silently)."""
        self.refresh()
        files = self._opened()
        return [] if files is None else files.index.errors()

    def stats(self) -> dict[str, Any]:
        self.refresh()
        files = self._opened()
        counts = dict(_EMPTY_COUNTS) if files is None else files.index.counts()
        stream_bytes = sum(_size(p) for p in (self.path / "streams").rglob("*.jsonl"))
        blobs = list(self._cas.hashes())
        index_bytes = sum(_size(p) for p in self.path.glob("index.sqlite*"))
        return {
            "path": str(self.path),
            "durability": self.durability,
            "last_seq": counts.pop("watermark"),
            **counts,
            "stream_bytes": stream_bytes,
            "content_objects": len(blobs),
            "content_bytes": sum(size for _, size in blobs),
            "index_bytes": index_bytes,
            "torn_tails_repaired": 0 if files is None else files.writer.repairs,
        }

    def gc(self, rules: list[Rule] | None = None, *, dry_run: bool = False) -> GcReport:
        """Apply the retention rules of `retention.json`, then `rules` (which win ties)."""
        return collect_garbage(self, load_rules(self.path) + list(rules or []), dry_run=dry_run)

    def flush(self) -> None:
        """fsync everything appended so far, whatever the durability setting."""
        files = self._opened()
        if files is not None:
            files.writer.flush()

    def close(self) -> None:
        for hub in list(self._hubs.values()):
            if hub.loop.is_running() and _running_loop() is not hub.loop:
                hub.loop.call_soon_threadsafe(hub.close)
            else:
                hub.close()
        with self._open_lock:
            self._closed = True
            files = self._files
        if files is not None:
            files.writer.close()
            files.index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _missing(path: Path) -> bool:
    """True if no store is at `path`: nothing there, or a directory no store was ever opened
    in (`ralph init` makes an empty `.ralph/store/`). A path that cannot be a store (a file,
    or below one) is not missing: opening it reports why."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(mode):
        return False
    try:
        return not any(path.iterdir())
    except OSError:
        return False


def _size(path: Path) -> int:
    """A file's size, 0 if it vanished meanwhile (gc, a rebuild)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _running_loop() -> asyncio.AbstractEventLoop | None:
    import asyncio  # noqa: PLC0415 - see the imports

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_MAX_SQL_INT = 2**63 - 1


def _check_count(name: str, value: int, minimum: int = 0) -> None:
    """A seq, limit or count must fit SQLite's integers (and make sense)."""
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
