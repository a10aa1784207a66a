"""PostgresStore: the event log in a PostgreSQL database, shared by every machine of a team.

The same contract as the file store, kept by the database:

- `seq` is gapless and store-wide: every append takes the one row of `ralph_head` for update
  and adds to its `last_seq` in the transaction that inserts the frames, so appends commit in
  seq order and a reader that sees `last_seq` sees every frame up to it (an append that
  fails rolls its seq back with it).
- Content lives in `ralph_content`, by its sha256 SRI hash, verified on read.
- Retention: the rules in `ralph_retention` (topic, policy) plus those given to gc.
- Subscriptions: appends NOTIFY `ralph_frames`; the hub LISTENs on its own connection and
  reads what is new from the table (replay, then live, the hub of ralph.store.subscribe).
- A lost connection (the server restarted) is retried for `retry_seconds`; an append whose
  commit went unanswered is looked up by its frame id before it is tried again, so a retry
  never appends a frame twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ralph.store.errors import (
    ContentCorruptError,
    ContentNotFoundError,
    StoreError,
    StoreNotWritableError,
    StoreWriteError,
)
from ralph.store.frame import (
    DEFAULT_STREAM,
    Frame,
    digest_from_sri,
    format_ts,
    sri_from_digest,
)
from ralph.store.ids import IdGenerator
from ralph.store.index import ParseError, Progress, SyncResult, TopicQuery, page_conditions
from ralph.store.location import masked_url
from ralph.store.retention import GcReport, Policy, Rule, rule_for
from ralph.store.store import Draft, Store, closed_error

if TYPE_CHECKING:
    import psycopg

    from ralph.store.writer import Durability

log = logging.getLogger("ralph.store")

T = TypeVar("T")

_Row = tuple[str, str, str, str, str, str | None]  # id, ts, topic, stream, meta, hash

CHANNEL = "ralph_frames"
_SCHEMA_LOCK = 0x52414C5048  # the advisory lock that serializes creating the tables
_SAFETY_POLL_S = 1.0  # a missed notification costs at most this much latency
_COLUMNS = "seq, id, ts, topic, stream, meta, hash"

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS ralph_head (
        id integer PRIMARY KEY CHECK (id = 1),
        last_seq bigint NOT NULL)""",
    "INSERT INTO ralph_head (id, last_seq) VALUES (1, 0) ON CONFLICT (id) DO NOTHING",
    """CREATE TABLE IF NOT EXISTS ralph_frames (
        seq bigint PRIMARY KEY,
        id text COLLATE "C" NOT NULL UNIQUE,
        ts text COLLATE "C" NOT NULL,
        topic text COLLATE "C" NOT NULL,
        stream text COLLATE "C" NOT NULL,
        meta text NOT NULL,
        hash text COLLATE "C")""",
    "CREATE INDEX IF NOT EXISTS ralph_frames_topic ON ralph_frames (topic, seq)",
    "CREATE INDEX IF NOT EXISTS ralph_frames_stream ON ralph_frames (stream, seq)",
    "CREATE INDEX IF NOT EXISTS ralph_frames_hash ON ralph_frames (hash) WHERE hash IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS ralph_content (
        hash text COLLATE "C" PRIMARY KEY,
        data bytea NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS ralph_retention (
        topic text COLLATE "C" PRIMARY KEY,
        policy text NOT NULL)""",
]

_APPEND = f"""
WITH head AS (UPDATE ralph_head SET last_seq = last_seq + 1 WHERE id = 1 RETURNING last_seq),
     added AS (INSERT INTO ralph_frames ({_COLUMNS})
               SELECT head.last_seq, %s, %s, %s, %s, %s, %s FROM head RETURNING seq)
SELECT seq, pg_notify('{CHANNEL}', seq::text) FROM added"""


class PostgresStore(Store):
    """An append-only event log in a PostgreSQL database (see the module's docstring).

    `durability`: `always` and `batch` commit synchronously (a commit that returned is on
    the server's disk: a server restart loses nothing); `never` turns the session's
    `synchronous_commit` off. `append_many` is the batch: one transaction for many frames.
    `batch_interval_ms` and `sync_on_open` mean nothing here and are accepted for the API.
    """

    def __init__(self, url: str | os.PathLike[str], *, durability: Durability = "batch",
                 batch_interval_ms: int = 20, max_lag: int = 10_000,
                 sync_on_open: bool = True, create: bool = True,
                 retry_seconds: float = 30.0) -> None:
        super().__init__(url, durability=durability, batch_interval_ms=batch_interval_ms,
                         max_lag=max_lag, sync_on_open=sync_on_open, create=create)
        self.url = str(url)
        self.retry_seconds = retry_seconds
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._ids: IdGenerator | None = None
        self._ready = False  # the tables exist
        self._reached = False  # a connection succeeded once: later failures are retried
        self._closed = False
        with self._lock:
            self._call(lambda conn: self._check_schema(conn, create=create))

    # -- the connection ----------------------------------------------------------------------

    @property
    def location(self) -> str:
        return self.url

    @property
    def display_location(self) -> str:
        return masked_url(self.url)

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg  # noqa: PLC0415 - only a PostgreSQL store needs it

        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10,
                                   application_name="ralph")
        except psycopg.OperationalError as exc:
            # A store never reached is a mistake to report now (a typo in the URL, no such
            # database or role, a wrong password), not a blip to wait out; so is a refusal
            # of who we are or what we asked for, whenever it comes.
            if not self._reached or (exc.sqlstate or "")[:2] in ("28", "3D"):
                raise StoreError(f"cannot open the store at {self.display_location}: "
                                 f"{_first_line(exc)}") from None
            raise
        except psycopg.Error as exc:  # a malformed URL, a bad option
            raise StoreError(f"cannot open the store at {self.display_location}: "
                             f"{_first_line(exc)}") from None
        self._reached = True
        if self.durability == "never":
            conn.execute("SET synchronous_commit = off")
        return conn

    def _call(self, work: Callable[[psycopg.Connection[Any]], T],
              on_retry: Callable[[psycopg.Connection[Any]], T | None] | None = None) -> T:
        """Run `work` on the connection (under the lock), reconnecting while the server cannot
        be reached, for at most `retry_seconds`. `on_retry` runs first on a new connection
        after a failure: it returns the result if the failed attempt took effect after all."""
        try:
            import psycopg  # noqa: PLC0415
        except ImportError:
            raise StoreError("a PostgreSQL store needs Ralph's scale extra: pip install "
                             "'ralph[scale]' (psycopg)") from None

        if self._closed:
            raise closed_error()
        if os.getpid() != self._pid:
            raise StoreError("a Store cannot be used across fork(); open a new one in the child")
        deadline = time.monotonic() + self.retry_seconds
        delay = 0.05
        failed = False
        with self._lock:
            while True:
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = self._connect()
                    if failed and on_retry is not None:
                        done = on_retry(self._conn)
                        if done is not None:
                            return done
                    return work(self._conn)
                except psycopg.OperationalError as exc:
                    self._drop_connection()
                    if time.monotonic() + delay > deadline:
                        raise StoreWriteError(
                            f"cannot reach the store at {self.display_location}: "
                            f"{_first_line(exc)}") from None
                    if not failed:
                        log.warning("lost the store's connection (%s); retrying for up to "
                                    "%.0f s", _first_line(exc), self.retry_seconds)
                    failed = True
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
                except psycopg.Error as exc:
                    raise StoreError(f"the store at {self.display_location} failed: "
                                     f"{_first_line(exc)}") from None

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _check_schema(self, conn: psycopg.Connection[Any], *, create: bool) -> None:
        """Create the tables if asked and missing; note whether they exist."""
        if self._ready:
            return
        row = conn.execute("SELECT to_regclass('ralph_head') IS NOT NULL AND "
                           "to_regclass('ralph_frames') IS NOT NULL").fetchone()
        if row is not None and row[0]:
            self._ready = True
            return
        if not create:
            return
        import psycopg  # noqa: PLC0415

        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _SCHEMA:
                    conn.execute(statement.encode())
        except psycopg.errors.InsufficientPrivilege as exc:
            raise StoreNotWritableError(f"cannot create the store's tables at "
                                        f"{self.display_location}: {_first_line(exc)}") from None
        self._ready = True

    def _writable(self, conn: psycopg.Connection[Any]) -> None:
        self._check_schema(conn, create=True)

    def _has_tables(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the store's tables exist (a reader's `create=False` creates nothing)."""
        self._check_schema(conn, create=False)
        return self._ready

    @property
    def exists(self) -> bool:
        return self._ready or self._call(self._has_tables)

    # -- writing ----------------------------------------------------------------------------

    def _next_id(self) -> tuple[str, str]:
        if self._ids is None:
            self._ids = IdGenerator()
        id_str, ms = self._ids.next()
        return id_str, format_ts(ms)

    def append(self, topic: str, meta: dict[str, Any] | None = None,
               content: bytes | str | None = None, stream: str = DEFAULT_STREAM) -> Frame:
        return self.append_many([Draft(topic, meta, content, stream)])[0]

    def append_many(self, drafts: Iterable[Draft]) -> list[Frame]:
        rows: list[_Row] = []
        blobs: dict[str, bytes] = {}
        for draft in drafts:
            meta_json, data = self._prepare(draft.topic, draft.meta, draft.content,
                                            draft.stream)
            rows.append((*self._next_id(), draft.topic, draft.stream, meta_json.decode(),
                         _keep(blobs, data)))
        return self._insert(rows, blobs)

    def _import_many(self, frames: list[tuple[Frame, bytes | None]]) -> list[Frame]:
        rows: list[_Row] = []
        blobs: dict[str, bytes] = {}
        for frame, data in frames:
            meta_json, _ = self._prepare(frame.topic, frame.meta, None, frame.stream)
            rows.append((frame.id, frame.ts, frame.topic, frame.stream, meta_json.decode(),
                         _keep(blobs, data)))
        return self._insert(rows, blobs)

    def _insert(self, rows: list[_Row], blobs: dict[str, bytes]) -> list[Frame]:
        """Append `rows` (id, ts, topic, stream, meta, hash) in one transaction."""
        if not rows:
            return []

        def write(conn: psycopg.Connection[Any]) -> list[int]:
            self._writable(conn)
            if len(rows) == 1 and not blobs:  # the common case: one round trip
                row = conn.execute(_APPEND, rows[0]).fetchone()
                assert row is not None
                return [row[0]]
            with conn.transaction():
                # The head's row lock first: gc takes it too, so it cannot find this batch's
                # content unreferenced and delete it before the frames are in.
                head = conn.execute("UPDATE ralph_head SET last_seq = last_seq + %s WHERE id = 1 "
                                    "RETURNING last_seq", (len(rows),)).fetchone()
                assert head is not None
                if blobs:
                    with conn.cursor() as cur:
                        cur.executemany("INSERT INTO ralph_content (hash, data) VALUES (%s, %s) "
                                        "ON CONFLICT (hash) DO NOTHING", sorted(blobs.items()))
                first = head[0] - len(rows) + 1
                with conn.cursor() as cur, cur.copy(
                        f"COPY ralph_frames ({_COLUMNS}) FROM STDIN") as copy:
                    for offset, row in enumerate(rows):
                        copy.write_row((first + offset, *row))
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(head[0])))
            return list(range(first, first + len(rows)))

        def already(conn: psycopg.Connection[Any]) -> list[int] | None:
            """The seqs of a batch whose commit went unanswered, if it was committed."""
            found = conn.execute("SELECT seq FROM ralph_frames WHERE id = ANY(%s) ORDER BY seq",
                                 ([row[0] for row in rows],)).fetchall()
            return [r[0] for r in found] if len(found) == len(rows) else None

        seqs = self._call(write, on_retry=already)
        self._appended()
        return [Frame(id=row[0], seq=seq, ts=row[1], topic=row[2], stream=row[3],
                      meta=orjson.loads(row[4]), hash=row[5]) for seq, row in zip(seqs, rows,
                                                                               strict=True)]

    # -- reading ----------------------------------------------------------------------------

    def refresh(self) -> int:
        return self._call(self._watermark)

    def _watermark(self, conn: psycopg.Connection[Any]) -> int:
        if not self._has_tables(conn):
            return 0
        row = conn.execute("SELECT last_seq FROM ralph_head WHERE id = 1").fetchone()
        return 0 if row is None else int(row[0])

    def sync(self, progress: Progress | None = None) -> SyncResult:
        """Nothing to index: the database is the index. Reports the watermark."""
        watermark = self.refresh()
        return SyncResult(0, 0, watermark, watermark)

    def rebuild(self, progress: Progress | None = None) -> SyncResult:
        """The database's indexes are its own: reindexes the frames table."""
        def reindex(conn: psycopg.Connection[Any]) -> int:
            if self._has_tables(conn):
                conn.execute("REINDEX TABLE ralph_frames")
                row = conn.execute("SELECT count(*) FROM ralph_frames").fetchone()
                return 0 if row is None else int(row[0])
            return 0

        frames = self._call(reindex)
        watermark = self.refresh()
        return SyncResult(frames, 0, watermark, watermark)

    def _lookup(self, frame_id: str) -> Frame | None:
        def fetch(conn: psycopg.Connection[Any]) -> Frame | None:
            if not self._has_tables(conn):
                return None
            row = conn.execute(f"SELECT {_COLUMNS} FROM ralph_frames WHERE id = %s",
                               (frame_id,)).fetchone()
            return None if row is None else _frame(row)

        return self._call(fetch)

    def _page(self, *, topic: TopicQuery | None = None, stream: str | None = None,
              after_seq: int = 0, upto: int | None = None, since: str | None = None,
              until: str | None = None, limit: int = 1000, newest_first: bool = False
              ) -> list[Frame]:
        where, args = page_conditions(topic, stream=stream, after_seq=after_seq, upto=upto,
                                      since=since, until=until, mark="%s")
        order = "DESC" if newest_first else "ASC"
        query = (f"SELECT {_COLUMNS} FROM ralph_frames WHERE {where} "
                 f"ORDER BY seq {order} LIMIT %s").encode()
        args.append(limit)

        def select(conn: psycopg.Connection[Any]) -> list[Frame]:
            if not self._has_tables(conn):
                return []
            return [_frame(row) for row in conn.execute(query, args).fetchall()]

        return self._call(select)

    def cas_get(self, hash_: str) -> bytes:
        digest_from_sri(hash_)

        def fetch(conn: psycopg.Connection[Any]) -> bytes | None:
            if not self._has_tables(conn):
                return None
            row = conn.execute("SELECT data FROM ralph_content WHERE hash = %s",
                               (hash_,)).fetchone()
            return None if row is None else bytes(row[0])

        data = self._call(fetch)
        if data is None:
            raise ContentNotFoundError(f"no content with hash {hash_}")
        if sri_from_digest(hashlib.sha256(data).digest()) != hash_:
            raise ContentCorruptError(f"content {hash_} is corrupt: its bytes no longer match")
        return data

    # -- live -------------------------------------------------------------------------------

    async def _watch_appends(self, wake: Callable[[], None], stop: asyncio.Event) -> None:
        """LISTEN for appends on a connection of its own; wake at least once a second, and
        reconnect (waking, so that the hub reads what it missed) when the server is lost."""
        import psycopg  # noqa: PLC0415

        delay = 0.05
        while not stop.is_set():
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=10,
                    application_name="ralph-listen")
                await conn.execute(f"LISTEN {CHANNEL}")
                wake()  # anything appended while this connection was not listening
                delay = 0.05
                while not stop.is_set():
                    async for _note in conn.notifies(timeout=_SAFETY_POLL_S, stop_after=1):
                        break
                    wake()
            except psycopg.Error as exc:
                log.warning("store subscription lost its connection (%s); reconnecting",
                            _first_line(exc))
                wake()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                delay = min(delay * 2, 1.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()

    # -- upkeep -----------------------------------------------------------------------------

    def errors(self) -> list[ParseError]:
        """Every row is a checked frame: a database store has nothing that is not one."""
        return []

    def stats(self) -> dict[str, Any]:
        def count(conn: psycopg.Connection[Any]) -> dict[str, Any]:
            if not self._has_tables(conn):
                return {"last_seq": 0, "frames": 0, "streams": 0, "topics": 0,
                        "content_objects": 0, "content_bytes": 0, "frame_bytes": 0,
                        "index_bytes": 0}
            row = conn.execute(
                "SELECT (SELECT last_seq FROM ralph_head WHERE id = 1), count(*), "
                "count(DISTINCT stream), count(DISTINCT topic), "
                "(SELECT count(*) FROM ralph_content), "
                "(SELECT coalesce(sum(octet_length(data)), 0) FROM ralph_content), "
                "pg_table_size('ralph_frames'), pg_indexes_size('ralph_frames') "
                "FROM ralph_frames").fetchone()
            assert row is not None
            return {"last_seq": row[0], "frames": row[1], "streams": row[2], "topics": row[3],
                    "content_objects": row[4], "content_bytes": int(row[5]),
                    "frame_bytes": row[6], "index_bytes": row[7]}

        counts = self._call(count)
        return {"path": self.display_location, "backend": "postgresql",
                "durability": self.durability, "last_seq": counts["last_seq"],
                "frames": counts["frames"], "streams": counts["streams"],
                "topics": counts["topics"], "parse_errors": 0,
                "stream_bytes": counts["frame_bytes"],
                "content_objects": counts["content_objects"],
                "content_bytes": counts["content_bytes"], "index_bytes": counts["index_bytes"],
                "torn_tails_repaired": 0}

    def retention_rules(self) -> list[Rule]:
        """The rules kept in the database (`ralph_retention`)."""
        def load(conn: psycopg.Connection[Any]) -> list[Rule]:
            if not self._has_tables(conn):
                return []
            rows = conn.execute("SELECT topic, policy FROM ralph_retention "
                                "ORDER BY topic").fetchall()
            return [Rule.of(topic, policy) for topic, policy in rows]

        return self._call(load)

    def set_retention(self, topic: str, policy: str | None) -> None:
        """Keep a rule for `topic` (None removes it)."""
        rule = None if policy is None else Rule.of(topic, policy)

        def put(conn: psycopg.Connection[Any]) -> None:
            self._writable(conn)
            if rule is None:
                conn.execute("DELETE FROM ralph_retention WHERE topic = %s", (topic,))
            else:
                conn.execute("INSERT INTO ralph_retention (topic, policy) VALUES (%s, %s) "
                             "ON CONFLICT (topic) DO UPDATE SET policy = excluded.policy",
                             (rule.topic, str(rule.policy)))

        self._call(put)

    def gc(self, rules: list[Rule] | None = None, *, dry_run: bool = False) -> GcReport:
        """Delete what the rules let go, in one transaction that holds appends back."""
        extra = list(rules or [])
        now_ms = int(time.time() * 1000)

        def collect(conn: psycopg.Connection[Any]) -> GcReport:
            if not self._has_tables(conn):
                return GcReport(0, 0, 0, 0, dry_run)
            with conn.transaction():
                conn.execute("SELECT last_seq FROM ralph_head WHERE id = 1 FOR UPDATE")
                stored = [Rule.of(t, p) for t, p in conn.execute(
                    "SELECT topic, policy FROM ralph_retention").fetchall()]
                all_rules = stored + extra
                doomed: list[int] = []
                for (topic,) in conn.execute("SELECT DISTINCT topic FROM ralph_frames"
                                             ).fetchall():
                    rule = rule_for(topic, all_rules)
                    if rule is not None:
                        doomed += _expired(conn, topic, rule.policy, now_ms)
                streams = conn.execute("SELECT count(DISTINCT stream), coalesce(sum("
                                       "octet_length(meta) + octet_length(id) + "
                                       "octet_length(topic) + octet_length(stream)), 0) "
                                       "FROM ralph_frames WHERE seq = ANY(%s)",
                                       (doomed,)).fetchone()
                assert streams is not None
                freed = int(streams[1])
                if not dry_run and doomed:
                    conn.execute("DELETE FROM ralph_frames WHERE seq = ANY(%s)", (doomed,))
                orphans = conn.execute(
                    "SELECT hash, octet_length(data) FROM ralph_content c WHERE NOT EXISTS "
                    "(SELECT 1 FROM ralph_frames f WHERE f.hash = c.hash AND NOT "
                    "(f.seq = ANY(%s)))", ([] if not dry_run else doomed,)).fetchall()
                freed += sum(int(size) for _, size in orphans)
                if not dry_run and orphans:
                    conn.execute("DELETE FROM ralph_content WHERE hash = ANY(%s)",
                                 ([h for h, _ in orphans],))
                return GcReport(len(doomed), int(streams[0]), len(orphans), freed, dry_run)

        return self._call(collect)

    def flush(self) -> None:
        """Commits are durable when they return, but with durability `never`: then one
        synchronous commit that writes (an xid) flushes the log up to it, and so every
        commit before it."""
        if self.durability != "never":
            return

        def synced(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit = on")
                conn.execute("SELECT pg_current_xact_id()")

        self._call(synced)

    def close(self) -> None:
        self._close_hubs()
        with self._lock:
            self._closed = True
            self._drop_connection()


def _keep(blobs: dict[str, bytes], data: bytes | None) -> str | None:
    """Note content to store with a batch; its hash."""
    if data is None:
        return None
    hash_ = sri_from_digest(hashlib.sha256(data).digest())
    blobs[hash_] = data
    return hash_


def _expired(conn: psycopg.Connection[Any], topic: str, policy: Policy, now_ms: int) -> list[int]:
    if policy.kind == "last":
        rows = conn.execute("SELECT seq FROM ralph_frames WHERE topic = %s ORDER BY seq DESC "
                            "OFFSET %s", (topic, policy.value)).fetchall()
    else:
        rows = conn.execute("SELECT seq FROM ralph_frames WHERE topic = %s AND ts < %s",
                            (topic, format_ts(now_ms - policy.value))).fetchall()
    return [row[0] for row in rows]


def _frame(row: tuple[Any, ...]) -> Frame:
    seq, id_, ts, topic, stream, meta, hash_ = row
    return Frame(id=id_, seq=seq, ts=ts, topic=topic, stream=stream, meta=orjson.loads(meta),
                 hash=hash_)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
