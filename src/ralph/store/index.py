"""The SQLite index: a rebuildable cache over every frame of every stream.

`sync` reads only what was appended since it last ran (a byte offset per stream) and is safe
to run from several processes at once: each sync is one write transaction that reads the
offsets inside it. The watermark is the highest seq up to which every frame is indexed; reads
stop there, so a reader never sees frame N+1 before frame N, whatever stream each lives in.

The index holds a frame's meta only when it is small (META_INLINE_BYTES of JSON at most):
agent output excerpts, gate receipts and the like would otherwise be stored twice, once in
the stream file and once here. A larger meta is NULL in the table and read from the frame's
line in its stream file (at the row's `byte_offset`) when the frame is read, so the frames a
query returns are the same either way; reading small frames never touches a stream file.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import orjson

from ralph.store.errors import StoreError
from ralph.store.frame import Frame, LineError, decode_line, format_ts
from ralph.store.fsio import write_error
from ralph.store.lines import FileCursor, complete_lines, line_end, replaced_or_shrunk
from ralph.store.streams import LineReader, StaleOffsetError, list_streams

log = logging.getLogger("ralph.store")

# 2: `meta` is NULL when it is larger than META_INLINE_BYTES (read from the stream file).
# An index of another version is rebuilt from the stream files (it is a cache).
SCHEMA_VERSION = 2
META_INLINE_BYTES = 1024
# A sync writes every page it changes to the WAL, which keeps its size (a second copy of what
# the sync wrote) until it is reset; past this size it is given back after a sync.
WAL_KEEP_BYTES = 4 * 1024 * 1024
_BUSY_TIMEOUT_MS = 60_000
_INSERT_BATCH = 5000
_EXCERPT = 200

_TABLES = """
CREATE TABLE IF NOT EXISTS frames (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    ts TEXT NOT NULL,
    topic TEXT NOT NULL,
    stream TEXT NOT NULL,
    meta TEXT,
    hash TEXT,
    byte_offset INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
    name TEXT PRIMARY KEY,
    byte_offset INTEGER NOT NULL,
    ino INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS event_parse_errors (
    id INTEGER PRIMARY KEY,
    stream TEXT NOT NULL,
    byte_offset INTEGER NOT NULL,
    excerpt TEXT NOT NULL,
    error TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    UNIQUE (stream, byte_offset)
);
CREATE TABLE IF NOT EXISTS index_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
# A secondary index holds the rowid (= seq), so (topic) is already ordered by (topic, seq).
_INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS frames_id ON frames (id);
CREATE INDEX IF NOT EXISTS frames_topic ON frames (topic);
CREATE INDEX IF NOT EXISTS frames_stream ON frames (stream);
CREATE INDEX IF NOT EXISTS frames_ts ON frames (ts);
"""
# The unique index on id stays during a rebuild: a duplicated line must be set aside as a
# parse error while loading, not make the final CREATE UNIQUE INDEX fail.
_DROP_INDEXES = """
DROP INDEX IF EXISTS frames_topic;
DROP INDEX IF EXISTS frames_stream;
DROP INDEX IF EXISTS frames_ts;
"""
_COLUMNS = "seq, id, ts, topic, stream, meta, hash, byte_offset"
# A topic range of fewer frames than this many pages is read topic by topic (Index.page).
_FEW = 10
Row = tuple[Any, ...]

T = TypeVar("T")
Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


@dataclass(frozen=True)
class SyncResult:
    frames: int  # frames newly indexed
    errors: int  # lines newly recorded as parse errors
    watermark: int  # every seq up to here is indexed (or gone for good)
    max_seq: int  # the highest seq in the index


@dataclass(frozen=True)
class ParseError:
    stream: str
    byte_offset: int
    excerpt: str
    error: str
    recorded_at: str


@dataclass(frozen=True)
class TopicQuery:
    """A topic filter: exact, or every topic starting with `value` (a prefix wildcard)."""

    value: str
    prefix: bool

    def sql(self) -> tuple[str, list[Any]]:
        if not self.prefix:
            return "topic = ?", [self.value]
        if not self.value:
            return "1", []
        upper = self.value[:-1] + chr(ord(self.value[-1]) + 1)
        return "topic >= ? AND topic < ?", [self.value, upper]

    def matches(self, topic: str) -> bool:
        return topic.startswith(self.value) if self.prefix else topic == self.value


def page_conditions(topic: TopicQuery | None, *, stream: str | None, after_seq: int,
                    upto: int | None, since: str | None, until: str | None,
                    mark: str = "?") -> tuple[str, list[Any]]:
    """The WHERE clause of a page of frames (both backends' tables have these columns) and
    its arguments; `mark` is the driver's placeholder (SQLite `?`, psycopg `%s`)."""
    where = ["seq > ?"]
    args: list[Any] = [after_seq]
    if upto is not None:
        where.append("seq <= ?")
        args.append(upto)
    if topic is not None:
        clause, topic_args = topic.sql()
        if clause != "1":  # every topic: no condition
            where.append(clause)
            args += topic_args
    if stream is not None:
        where.append("stream = ?")
        args.append(stream)
    if since is not None:
        where.append("ts >= ?")
        args.append(since)
    if until is not None:
        where.append("ts < ?")
        args.append(until)
    return " AND ".join(where).replace("?", mark), args


class OtherSchemaError(sqlite3.DatabaseError):
    """The index file was written with another schema version: it is rebuilt."""

    def __init__(self, version: int) -> None:
        super().__init__(f"the index has schema {version}, this version of Ralph uses "
                         f"{SCHEMA_VERSION}")


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return type(exc) in (sqlite3.DatabaseError, OtherSchemaError) or any(
        marker in text for marker in ("malformed", "not a database", "no such table")
    )


def _inline_meta(meta: dict[str, Any]) -> str | None:
    """What the index keeps of a meta: its JSON when small, else None (read from the line)."""
    data = orjson.dumps(meta)
    return data.decode() if len(data) <= META_INLINE_BYTES else None


class Index:
    """One SQLite database (WAL) at `path` over the stream files below `streams_root`."""

    def __init__(self, path: Path, streams_root: Path) -> None:
        self.path = path
        self.streams_root = streams_root
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._ino: int | None = None
        self._closed = False

    # -- connection and repair --------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            with self._setup_lock():
                # Missing means: no index, yet frames written before now. Streams that appear
                # after this check (another process appending to a new store) are not a
                # missing index; the next sync reads them.
                missing = not self.path.exists() and any(
                    True for _ in list_streams(self.streams_root))
            self._guarded(self._conn_checked)
            if missing and self._state(self._conn_checked(), "watermark") == 0:
                log.warning("the store index is missing; rebuilding it from the stream files")
                self.rebuild()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextlib.contextmanager
    def _setup_lock(self) -> Iterator[None]:
        """Serialise opening and recreating the database across processes: two processes
        creating a new index at once (WAL switch, schema) would otherwise see "database is
        locked", which SQLite's busy timeout does not cover for those steps."""
        fd = os.open(self.path.with_name("index.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        with self._setup_lock():
            return self._connect_locked()

    def _connect_locked(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                   timeout=_BUSY_TIMEOUT_MS / 1000)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
            conn.execute("PRAGMA cache_size=-16000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                conn.close()
                raise OtherSchemaError(version)
            conn.executescript(_TABLES + _INDEXES)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.OperationalError as exc:
            if "unable to open" in str(exc) or "readonly" in str(exc):
                raise StoreError(f"cannot open the store index {self.path}: {exc}") from None
            raise
        self._ino = self.path.stat().st_ino
        return conn

    def _conn_checked(self) -> sqlite3.Connection:
        """The connection, reopened if the file was deleted or replaced under us."""
        if self._closed:
            raise StoreError("the store is closed")
        try:
            ino: int | None = self.path.stat().st_ino
        except FileNotFoundError:
            ino = None
        if self._conn is not None and ino == self._ino:
            return self._conn
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            if ino is None:
                log.warning("the store index was deleted; rebuilding it from the stream files")
                self._conn = self._connect()
                self._rebuild_locked(None)
                return self._conn
        self._conn = self._connect()
        return self._conn

    def _guarded(self, action: Callable[[], T]) -> T:
        """Run `action`; if the database turns out corrupt, recreate and rebuild it, then retry."""
        with self._lock:
            try:
                return action()
            except sqlite3.DatabaseError as exc:
                if not _is_corruption(exc):
                    raise self._store_error(exc) from None
                if isinstance(exc, OtherSchemaError):
                    log.warning("%s; rebuilding it from the stream files", exc)
                else:
                    log.warning("the store index is corrupt (%s); rebuilding it from the "
                                "stream files", exc)
                try:
                    self._recreate()
                    return action()
                except sqlite3.Error as again:
                    raise self._store_error(again) from None

    def _store_error(self, exc: sqlite3.Error) -> StoreError:
        if "full" in str(exc):
            return write_error(OSError(28, "No space left on device"), "the store index")
        return StoreError(f"store index error: {exc}")

    def _recreate(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        with self._setup_lock():
            for suffix in ("", "-wal", "-shm"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
            self._conn = self._connect_locked()
        self._rebuild_locked(None)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn_checked()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled back already (disk full, I/O)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- state ------------------------------------------------------------------------------

    @staticmethod
    def _state(conn: sqlite3.Connection, key: str) -> int:
        row = conn.execute("SELECT value FROM index_state WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    @staticmethod
    def _set_state(conn: sqlite3.Connection, key: str, value: int) -> None:
        conn.execute("INSERT INTO index_state (key, value) VALUES (?, ?) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    # -- sync -------------------------------------------------------------------------------

    def sync(self, *, settle_upto: int | None = None,
             progress: Progress | None = None) -> SyncResult:
        """Index what was appended since the last sync.

        `settle_upto` is a seq known (under the append lock) to be complete on disk: holes at
        or below it that the files do not fill are permanent (frames removed by gc, or lost),
        and the watermark moves past them. `progress(done, total)` counts bytes read.
        """
        return self._guarded(lambda: self._sync_locked(settle_upto, progress))

    def _sync_locked(self, settle_upto: int | None, progress: Progress | None) -> SyncResult:
        with self._write() as conn:
            frames, errors = self._index_pending(conn, progress)
            watermark, max_seq = self._advance_watermark(conn, settle_upto)
        self._trim_wal()
        return SyncResult(frames, errors, watermark, max_seq)

    def _trim_wal(self) -> None:
        """Give back the WAL's space after a sync that made it large (a first sync of many
        frames, a rebuild), instead of keeping it until the next sync resets the WAL (which
        `journal_size_limit` then trims). Never waits: if another process is reading or
        writing the index right now, the next reset trims it."""
        if _file_size(Path(f"{self.path}-wal")) <= WAL_KEEP_BYTES or self._conn is None:
            return
        conn = self._conn
        conn.execute("PRAGMA busy_timeout=0")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.OperationalError as exc:  # busy or locked: another time
            log.debug("could not trim the index's WAL now: %s", exc)
        finally:
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")

    def _pending(self, conn: sqlite3.Connection) -> list[tuple[str, Path, int, int, int]]:
        """(stream, path, size, inode, offset to read from) of every stream with new bytes.

        Streams whose file was replaced (gc) or shrank are forgotten and read from the start;
        streams whose file is gone are dropped from the index.
        """
        known = {name: FileCursor(offset, ino) for name, offset, ino in
                 conn.execute("SELECT name, byte_offset, ino FROM streams")}
        work: list[tuple[str, Path, int, int, int]] = []
        seen: set[str] = set()
        for stream, path in list_streams(self.streams_root):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            seen.add(stream)
            cursor = known.get(stream, FileCursor(0, st.st_ino))
            offset = cursor.offset
            changed = replaced_or_shrunk(cursor, st)
            if changed is not None:
                if changed == "shrunk":
                    log.warning("stream %s shrank below what was indexed; reindexing it", stream)
                self._forget_stream(conn, stream)
                offset = 0
            if st.st_size > offset or stream not in known or changed is not None:
                work.append((stream, path, st.st_size, st.st_ino, offset))
        for gone in known.keys() - seen:
            log.warning("stream file of %s is gone; dropping its frames from the index", gone)
            self._forget_stream(conn, gone)
            conn.execute("DELETE FROM streams WHERE name = ?", (gone,))
        return work

    def _index_pending(self, conn: sqlite3.Connection,
                       progress: Progress | None) -> tuple[int, int]:
        """Index every stream's new bytes: (frames, parse errors) added."""
        work = self._pending(conn)
        total = sum(size - offset for _, _, size, _, offset in work)
        done = 0

        def advance(nbytes: int) -> None:
            nonlocal done
            done += nbytes
            if progress is not None:
                progress(done, total)

        frames = errors = 0
        for stream, path, size, ino, offset in work:
            try:
                handle = path.open("rb")
            except FileNotFoundError:  # removed since it was listed (gc): next sync sees it
                continue
            with handle:
                if os.fstat(handle.fileno()).st_ino != ino:
                    continue  # replaced since it was listed (gc): the next sync reindexes it
                new_offset, added, bad = self._index_stream(conn, stream, handle, offset, size,
                                                            advance)
            frames += added
            errors += bad
            conn.execute(
                "INSERT INTO streams (name, byte_offset, ino) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET byte_offset = excluded.byte_offset, "
                "ino = excluded.ino", (stream, new_offset, ino))
        if progress is not None:
            progress(total, total)
        return frames, errors

    def _forget_stream(self, conn: sqlite3.Connection, stream: str) -> None:
        conn.execute("DELETE FROM frames WHERE stream = ?", (stream,))
        conn.execute("DELETE FROM event_parse_errors WHERE stream = ?", (stream,))

    def _advance_watermark(self, conn: sqlite3.Connection,
                           settle_upto: int | None) -> tuple[int, int]:
        watermark = self._state(conn, "watermark")
        count, max_seq = conn.execute(
            "SELECT COUNT(*), MAX(seq) FROM frames WHERE seq > ?", (watermark,)).fetchone()
        if count and max_seq - watermark == count:
            watermark = max_seq
        elif count:
            for (seq,) in conn.execute("SELECT seq FROM frames WHERE seq > ? ORDER BY seq",
                                       (watermark,)):
                if seq != watermark + 1:
                    break
                watermark = seq
        if settle_upto is not None and settle_upto > watermark:
            watermark = settle_upto
        self._set_state(conn, "watermark", watermark)
        top = conn.execute("SELECT MAX(seq) FROM frames").fetchone()[0] or 0
        return watermark, max(top, watermark)

    def _index_stream(self, conn: sqlite3.Connection, stream: str, handle: BinaryIO,
                      offset: int, size: int, progress: Callable[[int], None] | None
                      ) -> tuple[int, int, int]:
        """Index the complete lines of a stream file in [offset, size): (new offset, frames,
        errors).

        A trailing piece without its newline is left for the next sync: a writer may be
        writing it right now, and a torn one is closed by the next append.
        """
        rows: list[tuple[Any, ...]] = []
        bad: list[tuple[Any, ...]] = []
        frames = errors = 0
        pos = offset
        for line_start, line in complete_lines(handle, offset, size, progress):
            pos = line_end(line_start, line)
            if not line.strip():
                continue
            try:
                frame_id, seq, ts, topic, meta, hash_ = decode_line(line, stream)
            except LineError as exc:
                bad.append(self._error_row(stream, line_start, line, str(exc)))
                continue
            rows.append((seq, frame_id, ts, topic, stream, _inline_meta(meta), hash_,
                         line_start))
            if len(rows) >= _INSERT_BATCH:
                frames += self._insert(conn, rows, bad)
                rows = []
        frames += self._insert(conn, rows, bad)
        if bad:
            errors = self._record_errors(conn, bad)
        return pos, frames, errors

    @staticmethod
    def _error_row(stream: str, offset: int, line: bytes, reason: str) -> tuple[Any, ...]:
        excerpt = line[:_EXCERPT].decode("utf-8", "replace")
        return (stream, offset, excerpt, reason, format_ts(int(_now_ms())))

    def _insert(self, conn: sqlite3.Connection, rows: list[tuple[Any, ...]],
                bad: list[tuple[Any, ...]]) -> int:
        if not rows:
            return 0
        sql = ("INSERT INTO frames (seq, id, ts, topic, stream, meta, hash, byte_offset) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        try:
            conn.execute("SAVEPOINT batch")
            conn.executemany(sql, rows)
            conn.execute("RELEASE batch")
            return len(rows)
        except sqlite3.IntegrityError:
            conn.execute("ROLLBACK TO batch")
            conn.execute("RELEASE batch")
        inserted = 0
        for row in rows:  # one at a time, so that only the conflicting lines are set aside
            try:
                conn.execute(sql, row)
                inserted += 1
            except sqlite3.IntegrityError:
                seq, frame_id, stream, offset = row[0], row[1], row[4], row[7]
                clash = conn.execute("SELECT stream, byte_offset FROM frames WHERE seq = ? OR "
                                     "id = ?", (seq, frame_id)).fetchone()
                where = f"{clash[0]} byte {clash[1]}" if clash else "another line"
                bad.append(self._error_row(stream, offset, orjson.dumps(
                    {"seq": seq, "id": frame_id}), f"duplicate seq or id (already at {where})"))
        return inserted

    @staticmethod
    def _record_errors(conn: sqlite3.Connection, bad: list[tuple[Any, ...]]) -> int:
        before = conn.total_changes
        conn.executemany("INSERT OR IGNORE INTO event_parse_errors "
                         "(stream, byte_offset, excerpt, error, recorded_at) "
                         "VALUES (?, ?, ?, ?, ?)", bad)
        new = conn.total_changes - before
        for stream, offset, _excerpt, reason, _at in bad[:5]:
            log.warning("stream %s byte %d is not a frame (%s); skipped and recorded",
                        stream, offset, reason)
        return new

    # -- rebuild ----------------------------------------------------------------------------

    def rebuild(self, progress: Progress | None = None) -> SyncResult:
        """Recreate the whole index from the stream files."""
        return self._guarded(lambda: self._rebuild_locked(progress))

    def _rebuild_locked(self, progress: Progress | None) -> SyncResult:
        with self._write() as conn:
            # Indexes are dropped for the bulk load and created once at the end: faster.
            _run_script(conn, _DROP_INDEXES)
            for table in ("frames", "streams", "event_parse_errors", "index_state"):
                conn.execute(f"DELETE FROM {table}")
            frames, errors = self._index_pending(conn, progress)
            _run_script(conn, _INDEXES)
            watermark, max_seq = self._advance_watermark(conn, None)
        self._trim_wal()
        return SyncResult(frames, errors, watermark, max_seq)

    def reindex_streams(self, names: list[str]) -> None:
        """Forget and reread these streams (their files were rewritten by gc)."""
        def run() -> None:
            with self._write() as conn:
                for name in names:
                    self._forget_stream(conn, name)
                    conn.execute("DELETE FROM streams WHERE name = ?", (name,))
        self._guarded(run)
        self.sync()

    # -- queries ----------------------------------------------------------------------------

    def page(self, *, topic: TopicQuery | None = None, stream: str | None = None,
             after_seq: int = 0, upto: int | None = None, since: str | None = None,
             until: str | None = None, limit: int = 1000, newest_first: bool = False
             ) -> list[Frame]:
        """One page of frames matching every filter given, in seq order (or newest first)."""
        def conditions(query: TopicQuery | None) -> tuple[str, list[Any]]:
            return page_conditions(query, stream=stream, after_seq=after_seq, upto=upto,
                                   since=since, until=until)

        order = "DESC" if newest_first else "ASC"

        def select(query: TopicQuery | None) -> list[Row]:
            where, args = conditions(query)
            return self._conn_checked().execute(
                f"SELECT {_COLUMNS} FROM frames WHERE {where} ORDER BY seq {order} LIMIT ?",
                [*args, limit]).fetchall()

        def select_range() -> list[Row]:
            # A topic range with a seq range makes SQLite walk the frames by seq (the rowid)
            # looking for those topics: when they are few (notes among agent output), ask for
            # each topic of the range instead (an index search each) and merge by seq.
            assert topic is not None
            lower, upper = topic.sql()[1]
            few = self._conn_checked().execute(
                "SELECT COUNT(*) FROM (SELECT 1 FROM frames WHERE topic >= ? AND topic < ? "
                "LIMIT ?)", (lower, upper, _FEW * limit)).fetchone()[0] < _FEW * limit
            if not few:
                return select(topic)
            rows = []
            for name in self._topics_from(topic.value):
                where, args = conditions(TopicQuery(name, prefix=False))
                rows += self._conn_checked().execute(
                    f"SELECT {_COLUMNS} FROM frames WHERE {where} ORDER BY seq {order} "
                    "LIMIT ?", [*args, limit]).fetchall()
            rows.sort(key=lambda row: int(row[0]), reverse=newest_first)
            return rows[:limit]

        if topic is not None and topic.prefix and topic.value:
            return self._frames(select_range)
        return self._frames(lambda: select(topic))

    def _topics_from(self, prefix: str) -> list[str]:
        """The distinct topics starting with `prefix`, one index search each (a skip scan:
        never a walk over every frame of those topics)."""
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        found: list[str] = []
        after, operator = prefix, ">="
        while True:
            row = self._conn_checked().execute(
                f"SELECT topic FROM frames WHERE topic {operator} ? AND topic < ? "
                "ORDER BY topic LIMIT 1", (after, upper)).fetchone()
            if row is None:
                return found
            after, operator = row[0], ">"
            found.append(after)

    def get(self, frame_id: str) -> Frame | None:
        frames = self._frames(lambda: self._conn_checked().execute(
            f"SELECT {_COLUMNS} FROM frames WHERE id = ?", (frame_id,)).fetchall())
        return frames[0] if frames else None

    def _frames(self, query: Callable[[], list[Row]]) -> list[Frame]:
        """The frames of the rows `query` selects (`_COLUMNS`), metas the index does not hold
        read from the stream files.

        A row's byte offset is stale when its stream file was rewritten (a gc, perhaps by
        another process) after the row was read: then the index catches up with the files
        and the query runs again.
        """
        rows = self._guarded(query)
        try:
            return self._to_frames(rows)
        except StaleOffsetError:
            pass
        self.sync()
        rows = self._guarded(query)
        try:
            return self._to_frames(rows)
        except StaleOffsetError as exc:
            raise StoreError(f"{exc}: the index does not match the stream files; run "
                             "`ralph store rebuild`") from None

    def _to_frames(self, rows: list[Row]) -> list[Frame]:
        reader: LineReader | None = None
        frames = []
        try:
            for seq, frame_id, ts, topic, stream, meta, hash_, offset in rows:
                if meta is not None:
                    value = orjson.loads(meta)
                else:
                    if reader is None:
                        reader = LineReader(self.streams_root)
                    value = reader.meta(stream, offset, seq, frame_id)
                frames.append(Frame(id=frame_id, seq=seq, ts=ts, topic=topic, stream=stream,
                                    meta=value, hash=hash_))
        finally:
            if reader is not None:
                reader.close()
        return frames

    def errors(self) -> list[ParseError]:
        rows = self._guarded(lambda: self._conn_checked().execute(
            "SELECT stream, byte_offset, excerpt, error, recorded_at FROM event_parse_errors "
            "ORDER BY stream, byte_offset").fetchall())
        return [ParseError(*row) for row in rows]

    def topics(self) -> list[tuple[str, int]]:
        return self._guarded(lambda: self._conn_checked().execute(
            "SELECT topic, COUNT(*) FROM frames GROUP BY topic ORDER BY topic").fetchall())

    def referenced_hashes(self) -> set[str]:
        """Every content hash some indexed frame refers to."""
        return {row[0] for row in self._guarded(lambda: self._conn_checked().execute(
            "SELECT DISTINCT hash FROM frames WHERE hash IS NOT NULL").fetchall())}

    def counts(self) -> dict[str, int]:
        def run() -> dict[str, int]:
            conn = self._conn_checked()
            frames, streams = conn.execute(
                "SELECT COUNT(*), COUNT(DISTINCT stream) FROM frames").fetchone()
            return {
                "frames": frames,
                "streams": streams,
                "topics": conn.execute("SELECT COUNT(DISTINCT topic) FROM frames").fetchone()[0],
                "parse_errors": conn.execute(
                    "SELECT COUNT(*) FROM event_parse_errors").fetchone()[0],
                "watermark": self._state(conn, "watermark"),
            }
        return self._guarded(run)

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A read-only query for the store's own projections (retention, stats)."""
        return self._guarded(lambda: self._conn_checked().execute(sql, args).fetchall())


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Statements one by one: executescript() would commit the open transaction first."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _now_ms() -> float:
    return time.time() * 1000
