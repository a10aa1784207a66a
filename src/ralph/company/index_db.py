"""The AgentCompany index file (`.local/index.sqlite`): its tables, and opening it to write
(made if missing, recreated if it is not a database) or to read (never made).

The six tables are AgentCompany's, column for column, with its primary keys and indexes, so
that either implementation can read and sync the other's file. Two tables are Ralph's own
(`ralph_` names; AgentCompany ignores them): where each run's events file was read up to,
and a signature of each source file, so that a sync rereads only what changed. The file is
in WAL mode: readers are never blocked by a sync, and see the index before it or after it.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ralph.company.layout import INDEX_FILE, CompanyError
from ralph.flock import exclusive

log = logging.getLogger("ralph.company.index")

BUSY_TIMEOUT_S = 60.0
WAL_KEEP_BYTES = 4 * 1024 * 1024

# AgentCompany's schema (the same tables, columns, keys and indexes).
TABLES = """
CREATE TABLE IF NOT EXISTS runs (
  project_id TEXT NOT NULL, run_id TEXT NOT NULL, created_at TEXT NOT NULL,
  status TEXT NOT NULL, provider TEXT NOT NULL, agent_id TEXT NOT NULL,
  context_pack_id TEXT NOT NULL, events_relpath TEXT NOT NULL,
  PRIMARY KEY (project_id, run_id)
);
CREATE INDEX IF NOT EXISTS idx_runs_created_at ON runs(created_at DESC);
CREATE INDEX IF NOT EXISTS idx_runs_status ON runs(status);
CREATE TABLE IF NOT EXISTS events (
  project_id TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,
  ts_wallclock TEXT, ts_monotonic_ms INTEGER, actor TEXT, session_ref TEXT, visibility TEXT,
  payload_json TEXT NOT NULL, raw_json TEXT NOT NULL,
  PRIMARY KEY (project_id, run_id, seq)
);
CREATE INDEX IF NOT EXISTS idx_events_type ON events(type);
CREATE INDEX IF NOT EXISTS idx_events_wallclock ON events(ts_wallclock DESC);
CREATE TABLE IF NOT EXISTS event_parse_errors (
  project_id TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, error TEXT NOT NULL,
  raw_line TEXT NOT NULL,
  PRIMARY KEY (project_id, run_id, seq)
);
CREATE TABLE IF NOT EXISTS artifacts (
  project_id TEXT NOT NULL, artifact_id TEXT NOT NULL, type TEXT NOT NULL, title TEXT,
  visibility TEXT, produced_by TEXT, run_id TEXT, context_pack_id TEXT, created_at TEXT,
  relpath TEXT NOT NULL,
  PRIMARY KEY (project_id, artifact_id)
);
CREATE INDEX IF NOT EXISTS idx_artifacts_type ON artifacts(type);
CREATE INDEX IF NOT EXISTS idx_artifacts_created_at ON artifacts(created_at DESC);
CREATE INDEX IF NOT EXISTS idx_artifacts_run_id ON artifacts(run_id);
CREATE TABLE IF NOT EXISTS reviews (
  review_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, decision TEXT NOT NULL,
  actor_id TEXT NOT NULL, actor_role TEXT NOT NULL, subject_kind TEXT NOT NULL,
  subject_artifact_id TEXT NOT NULL, project_id TEXT NOT NULL, notes TEXT
);
CREATE INDEX IF NOT EXISTS idx_reviews_created_at ON reviews(created_at DESC);
CREATE INDEX IF NOT EXISTS idx_reviews_project_id ON reviews(project_id);
CREATE TABLE IF NOT EXISTS help_requests (
  help_request_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, title TEXT NOT NULL,
  visibility TEXT NOT NULL, requester TEXT NOT NULL, target_manager TEXT NOT NULL,
  project_id TEXT, share_pack_id TEXT
);
CREATE INDEX IF NOT EXISTS idx_help_requests_created_at ON help_requests(created_at DESC);
CREATE INDEX IF NOT EXISTS idx_help_requests_target ON help_requests(target_manager);
"""

# Ralph's own: a run's events file read up to `byte_offset` (`seq` non-blank lines), the file
# then being (`ino`, `size`, `mtime_ns`) with `mark` before the offset (ralph.store.lines);
# and each source file's signature with the key of the row it gave (NULL: not a valid one).
OWN_TABLES = """
CREATE TABLE IF NOT EXISTS ralph_event_cursors (
  project_id TEXT NOT NULL, run_id TEXT NOT NULL, byte_offset INTEGER NOT NULL,
  seq INTEGER NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL, mark BLOB NOT NULL,
  PRIMARY KEY (project_id, run_id)
);
CREATE TABLE IF NOT EXISTS ralph_index_sources (
  relpath TEXT PRIMARY KEY, ino INTEGER NOT NULL, size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, key1 TEXT, key2 TEXT
);
"""

# Ralph's indexes over `events`, so that a page of a run's, a project's or a type's events in
# the readers' order (wallclock, seq, run, project) is a range of an index, never a sort of
# every event: AgentCompany's readers and writers only see them as the table's indexes.
OWN_EVENT_INDEXES = """
CREATE INDEX IF NOT EXISTS ralph_events_by_run ON events(run_id, ts_wallclock, seq, project_id);
CREATE INDEX IF NOT EXISTS ralph_events_by_project
  ON events(project_id, ts_wallclock, seq, run_id);
CREATE INDEX IF NOT EXISTS ralph_events_by_type
  ON events(type, ts_wallclock, seq, run_id, project_id);
"""

ALL_TABLES = ("runs", "events", "event_parse_errors", "artifacts", "reviews", "help_requests",
              "ralph_event_cursors", "ralph_index_sources")
EVENT_INDEXES = """
CREATE INDEX IF NOT EXISTS idx_events_type ON events(type);
CREATE INDEX IF NOT EXISTS idx_events_wallclock ON events(ts_wallclock DESC);
""" + OWN_EVENT_INDEXES
EVENT_INDEX_NAMES = ("idx_events_type", "idx_events_wallclock", "ralph_events_by_run",
                     "ralph_events_by_project", "ralph_events_by_type")


def db_path(root: Path) -> Path:
    return root / INDEX_FILE


def is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """Whether `exc` says the file is not a usable index (not a database, damaged, or
    without the tables and columns it must have), as opposed to busy, full or unreadable."""
    text = str(exc).lower()
    return type(exc) is sqlite3.DatabaseError or any(marker in text for marker in (
        "malformed", "not a database", "no such table", "no such column", "has no column"))


@contextlib.contextmanager
def setup_lock(root: Path) -> Iterator[None]:
    """Serialise making, switching to WAL and recreating the file across processes (SQLite's
    busy timeout does not cover those steps)."""
    with exclusive(db_path(root).with_name("index.sqlite.lock")):
        yield


def _connect(path: Path, create: bool) -> sqlite3.Connection:
    uri = f"file:{path}?mode={'rwc' if create else 'rw'}"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("PRAGMA cache_size=-16000")
    except BaseException:
        conn.close()
        raise
    return conn


def open_for_write(root: Path) -> tuple[sqlite3.Connection, bool]:
    """(connection, whether the file was made now), the tables made if missing. A file that
    is not a usable index is deleted and made anew (it is a cache of the workspace)."""
    path = db_path(root)
    with setup_lock(root):
        created = not path.exists()
        if created:  # a WAL left by a deleted file would be replayed into the new one
            remove_files(path)
        try:
            return _prepare(_connect(path, True)), created
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            log.warning("the index %s is not a usable database (%s); making it anew", path, exc)
            remove_files(path)
            return _prepare(_connect(path, True)), True


def _prepare(conn: sqlite3.Connection) -> sqlite3.Connection:
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA journal_size_limit={WAL_KEEP_BYTES}")
        conn.executescript(TABLES + OWN_TABLES + OWN_EVENT_INDEXES)
        # A file with these tables in another shape (not this schema) is no index of ours.
        conn.execute("SELECT project_id, run_id, seq, type, ts_wallclock, ts_monotonic_ms, "
                     "actor, session_ref, visibility, payload_json, raw_json FROM events "
                     "LIMIT 0")
        conn.execute("SELECT byte_offset, seq, ino, size, mtime_ns, mark "
                     "FROM ralph_event_cursors LIMIT 0")
    except BaseException:
        conn.close()
        raise
    return conn


def remove_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def open_for_read(root: Path) -> sqlite3.Connection:
    """A connection to the index; CompanyError if there is none (readers never make it)."""
    path = db_path(root)
    if not path.is_file():
        raise CompanyError(f"Index database not found: {path}. Run index.rebuild first.",
                           db_path=str(path))
    try:
        return _connect(path, False)
    except sqlite3.OperationalError as exc:
        if "unable to open" in str(exc):
            raise CompanyError(f"Index database not found: {path}. Run index.rebuild first.",
                               db_path=str(path)) from None
        raise


def trim_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Give back a WAL a large sync grew, unless someone is using the index right now."""
    try:
        size = Path(f"{path}-wal").stat().st_size
    except FileNotFoundError:
        return
    if size <= WAL_KEEP_BYTES:
        return
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.OperationalError as exc:
        log.debug("could not trim the index's WAL now: %s", exc)
