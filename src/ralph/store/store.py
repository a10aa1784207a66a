"""The Store: the public face of the event log (append, read, subscribe, content, upkeep)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from ralph.store.cas import ContentStore
from ralph.store.errors import (
    FrameNotFoundError,
    InvalidContentError,
    InvalidQueryError,
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
from ralph.store.subscribe import Hub, Lag, Subscription
from ralph.store.writer import DURABILITY_MODES, Durability, Writer

_PAGE = 1000
_VALID_NAMES_CACHE = 4096


class Store:
    """An append-only event log in a directory.

    Layout: `streams/<stream>.jsonl` (the truth), `cas/` (content by sha256), `index.sqlite`
    (a cache over all streams), `head` (the append lock and the last seq). Safe to use from
    several threads and several processes at once.
    """

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability = "batch",
                 batch_interval_ms: int = 20, max_lag: int = 10_000,
                 sync_on_open: bool = True) -> None:
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {', '.join(DURABILITY_MODES)}")
        if max_lag < 1:
            raise ValueError("max_lag must be at least 1")
        self.path = Path(path)
        self.durability = durability
        self.max_lag = max_lag
        streams_root = self.path / "streams"
        try:
            streams_root.mkdir(parents=True, exist_ok=True)
            (self.path / "cas").mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreNotWritableError(
                f"cannot create the store at {self.path}: {exc.strerror}") from None
        self._cas = ContentStore(self.path / "cas", sync_writes=durability == "always")
        self._writer = Writer(self.path, self._cas, durability, batch_interval_ms)
        self._index = Index(self.path / "index.sqlite", streams_root)
        self._valid_topics: set[str] = set()
        self._valid_streams: set[str] = set()
        self._hubs: dict[asyncio.AbstractEventLoop, Hub] = {}
        self._hubs_lock = threading.Lock()
        # (head bytes, watermark) of the last sync: one tuple, so threads never see a mix.
        self._synced: tuple[bytes, int] | None = None
        try:
            self._writer.settle()  # closes a torn tail left by a writer that died
            self._index.open()
            if sync_on_open:  # records a torn tail found above, and whatever else is new
                self.refresh()
        except BaseException:
            self._writer.close()
            self._index.close()
            raise

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
        hash_ = None if data is None else self._cas.put(data)
        done = self._writer.append(topic, stream, meta_json, hash_, data)
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
        raw = self._writer.peek_head()
        synced = self._synced
        if synced is not None and synced[0] == raw:
            return synced[1]
        return self._sync(raw).watermark

    def sync(self, progress: Progress | None = None) -> SyncResult:
        """Index everything appended since the last sync (what reads do implicitly).

        `progress(done, total)` is called with the bytes read so far.
        """
        return self._sync(self._writer.peek_head(), progress)

    def _sync(self, raw: bytes, progress: Progress | None = None) -> SyncResult:
        head = Head.decode(raw)
        result = self._index.sync(progress=progress)
        if result.max_seq > result.watermark or (head is not None
                                                 and result.watermark < head.seq):
            last, raw = self._writer.settle()
            result = self._index.sync(settle_upto=last)
        self._synced = (raw, result.watermark)
        return result

    def rebuild(self, progress: Progress | None = None) -> SyncResult:
        """Recreate the index from the stream files."""
        rebuilt = self._index.rebuild(progress)
        synced = self._sync(self._writer.peek_head())
        return SyncResult(rebuilt.frames + synced.frames, rebuilt.errors + synced.errors,
                          synced.watermark, synced.max_seq)

    def get(self, frame_id: str) -> Frame:
        """The frame with this id; FrameNotFoundError if there is none."""
        self.refresh()
        # A SCRU128 id is ASCII; anything else (undecodable bytes from argv) cannot name one.
        frame = self._index.get(frame_id) if frame_id.isascii() else None
        if frame is None:
            raise FrameNotFoundError(f"no frame with id {frame_id!r}")
        return frame

    def last(self, topic: str, n: int = 1) -> list[Frame]:
        """The last `n` frames of a topic (or `prefix.*`), oldest first."""
        _check_count("n", n, minimum=1)
        query = TopicQuery(*topic_filter(topic))
        upto = self.refresh()
        frames = self._index.page(topic=query, upto=upto, limit=n, newest_first=True)
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
            frames = self._index.page(topic=query, stream=stream, after_seq=cursor, upto=upto,
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
        query = None if topic is None else TopicQuery(*topic_filter(topic))
        if stream is not None:
            check_stream(stream)
        if after_seq is not None:
            _check_count("after_seq", after_seq)
        return Subscription(self, query, stream, after_seq or 0, self.max_lag, on_lag)

    async def _hub(self) -> Hub:
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
        return self._index.errors()

    def stats(self) -> dict[str, Any]:
        self.refresh()
        counts = self._index.counts()
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
            "torn_tails_repaired": self._writer.repairs,
        }

    def gc(self, rules: list[Rule] | None = None, *, dry_run: bool = False) -> GcReport:
        """Apply the retention rules of `retention.json`, then `rules` (which win ties)."""
        return collect_garbage(self, load_rules(self.path) + list(rules or []), dry_run=dry_run)

    def flush(self) -> None:
        """fsync everything appended so far, whatever the durability setting."""
        self._writer.flush()

    def close(self) -> None:
        for hub in list(self._hubs.values()):
            if hub.loop.is_running() and _running_loop() is not hub.loop:
                hub.loop.call_soon_threadsafe(hub.close)
            else:
                hub.close()
        self._writer.close()
        self._index.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _size(path: Path) -> int:
    """A file's size, 0 if it vanished meanwhile (gc, a rebuild)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _running_loop() -> asyncio.AbstractEventLoop | None:
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
