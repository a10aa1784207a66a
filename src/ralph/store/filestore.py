"""FileStore: the event log in a directory (JSONL streams, a content store, a SQLite index)."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ralph.store.cas import ContentStore
from ralph.store.errors import StoreNotWritableError
from ralph.store.frame import DEFAULT_STREAM, Frame, digest_from_sri
from ralph.store.head import Head
from ralph.store.index import Index, ParseError, Progress, SyncResult, TopicQuery
from ralph.store.retention import GcReport, Rule, collect_garbage, load_rules
from ralph.store.store import Store, closed_error
from ralph.store.writer import Durability, Writer

# asyncio is a subscription's (see ralph.store.store): imported by the first subscribe().
if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("ralph.store")

_NOTHING_SYNCED = SyncResult(0, 0, 0, 0)
_SAFETY_POLL_MS = 1000  # a missed file event costs at most this much latency
_FALLBACK_POLL_S = 0.02


@dataclass(frozen=True)
class _Files:
    """What an opened store holds open: the append path and the index."""

    writer: Writer
    index: Index


_EMPTY_COUNTS = {"frames": 0, "streams": 0, "topics": 0, "parse_errors": 0, "watermark": 0}


class FileStore(Store):
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
        super().__init__(path, durability=durability, batch_interval_ms=batch_interval_ms,
                         max_lag=max_lag, sync_on_open=sync_on_open, create=create)
        self.path = Path(path)
        self._batch_interval_ms = batch_interval_ms
        self._sync_on_open = sync_on_open
        self._cas = ContentStore(self.path / "cas", sync_writes=durability == "always")
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
            raise closed_error()
        if _missing(self.path):
            return None
        return self._open_once()

    def _for_writing(self) -> _Files:
        """The open files, creating the store if it does not exist yet."""
        files = self._files
        if files is not None:
            return files
        if self._closed:
            raise closed_error()
        return self._open_once()

    def _open_once(self) -> _Files:
        with self._open_lock:
            if self._closed:  # closed by another thread meanwhile: open nothing any more
                raise closed_error()
            if self._files is None:
                self._files = self._open()
            return self._files

    @property
    def location(self) -> str:
        """The directory, absolute: another process in another directory opens it too."""
        return str(self.path.absolute())

    @property
    def exists(self) -> bool:
        """False while a `create=False` store's directory does not exist."""
        return self._opened() is not None

    # -- writing ----------------------------------------------------------------------------

    def append(self, topic: str, meta: dict[str, Any] | None = None,
               content: bytes | str | None = None, stream: str = DEFAULT_STREAM) -> Frame:
        meta_json, data = self._prepare(topic, meta, content, stream)
        writer = (self._files or self._for_writing()).writer
        hash_ = None if data is None else self._cas.put(data)
        done = writer.append(topic, stream, meta_json, hash_, data)
        self._appended()
        return Frame(id=done.id, seq=done.seq, ts=done.ts, topic=topic,
                                     stream=stream, meta=orjson.loads(meta_json), hash=hash_)

    def _import_many(self, frames: list[tuple[Frame, bytes | None]]) -> list[Frame]:
        writer = (self._files or self._for_writing()).writer
        copied = []
        for frame, data in frames:
            meta_json, _ = self._prepare(frame.topic, frame.meta, None, frame.stream)
            hash_ = None if data is None else self._cas.put(data)
            done = writer.append(frame.topic, frame.stream, meta_json, hash_, data,
                                 stamp=(frame.id, frame.ts))
            copied.append(Frame(id=done.id, seq=done.seq, ts=done.ts, topic=frame.topic,
                                stream=frame.stream, meta=frame.meta, hash=hash_))
        self._appended()
        return copied

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

    def _lookup(self, frame_id: str) -> Frame | None:
        self.refresh()
        files = self._opened()
        return None if files is None else files.index.get(frame_id)

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

    def cas_get(self, hash_: str) -> bytes:
        """Content by its SRI hash, verified against it."""
        digest_from_sri(hash_)
        return self._cas.get(hash_)

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
        self._close_hubs()
        with self._open_lock:
            self._closed = True
            files = self._files
        if files is not None:
            files.writer.close()
            files.index.close()

    async def _watch_appends(self, wake: Callable[[], None], stop: asyncio.Event) -> None:
        """Wake on every change of the head file: appends by other processes."""
        import asyncio  # noqa: PLC0415 - a subscription's, see ralph.store.store

        import watchfiles  # noqa: PLC0415

        head = self.path / "head"
        while not head.exists():
            # A store not created yet (a reader's `create=False`): look for it once per
            # safety poll; an append through this Store wakes the hub at once anyway.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), _SAFETY_POLL_MS / 1000)
            if stop.is_set():
                return
            wake()
        try:
            async for _changes in watchfiles.awatch(
                head, watch_filter=None, debounce=20, step=1, stop_event=stop,
                rust_timeout=_SAFETY_POLL_MS, yield_on_timeout=True, recursive=False,
            ):
                wake()
        except (OSError, RuntimeError) as exc:  # no inotify here: fall back to polling
            log.warning("cannot watch %s (%s); polling it instead", head, exc)
            while not stop.is_set():
                await asyncio.sleep(_FALLBACK_POLL_S)
                wake()


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
