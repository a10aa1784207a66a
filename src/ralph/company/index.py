"""The AgentCompany index (`.local/index.sqlite`), a rebuildable cache of the workspace's
runs, events, artifacts, reviews and help requests: `index.rebuild`, `index.sync`,
`index.stats`, the `index.list_*` readers, `recent_events` (subscription backfill) and the
refresh policy the snapshots share.

Writes are one `BEGIN IMMEDIATE` transaction that reads the sync state inside it, so two
processes syncing at once never index a line twice; readers see the index before a write or
after it (WAL). A file that is not a usable index is made anew (a warning is logged), by a
writer or by a reader, rather than failing every call.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from ralph.company.events import parse_json
from ralph.company.index_db import (
    ALL_TABLES,
    EVENT_INDEX_NAMES,
    EVENT_INDEXES,
    OWN_EVENT_INDEXES,
    OWN_TABLES,
    TABLES,
    db_path,
    is_corruption,
    open_for_read,
    open_for_write,
    remove_files,
    setup_lock,
    trim_wal,
)
from ralph.company.index_sync import SyncCounts, sync_all
from ralph.company.layout import require_workspace
from ralph.store.lines import FileCursor

log = logging.getLogger("ralph.company.index")
T = TypeVar("T")

EVENT_COLUMNS = ("project_id, run_id, seq, type, ts_wallclock, ts_monotonic_ms, actor, "
                 "session_ref, visibility, payload_json, raw_json")
# Events are ordered by wallclock time, then seq (AgentCompany's order), then run and project:
# the last two make the order total, so a page or a backfill never depends on SQLite's
# whims (and every filter has an index in this order: ralph.company.index_db).
_EVENT_ORDER = "ts_wallclock {0}, seq {0}, run_id {0}, project_id {0}"
Order = Literal["asc", "desc"]


# -- writing -------------------------------------------------------------------------------

def _write(root: Path, body: Callable[[sqlite3.Connection, bool], T]) -> T:
    """`body(conn, created)` in one write transaction; on a damaged file, once more on a
    new one."""
    for attempt in (1, 2):
        conn, created = open_for_write(root)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = body(conn, created)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            trim_wal(conn, db_path(root))
            # The file's mtime says when the index was last brought up to date (the doctor
            # compares it with the sources'), even when this write only reached the WAL.
            os.utime(db_path(root))
            return result
        except sqlite3.DatabaseError as exc:
            if attempt == 2 or not is_corruption(exc):
                raise
            log.warning("the index %s is damaged (%s); making it anew", db_path(root), exc)
        finally:
            conn.close()
        with setup_lock(root):
            remove_files(db_path(root))
    raise AssertionError("unreachable")


def _script(conn: sqlite3.Connection, script: str) -> None:
    """Statements one by one: executescript() would commit the open transaction."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _bulk_sync(conn: sqlite3.Connection, root: Path) -> SyncCounts:
    """A sync into empty event tables: their secondary indexes are made once, at the end."""
    for name in EVENT_INDEX_NAMES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    counts = sync_all(conn, root, empty=True)
    _script(conn, EVENT_INDEXES)
    return counts


def rebuild_index(root: Path) -> dict[str, Any]:
    """Index the whole workspace anew: {db_path, runs_indexed, events_indexed,
    event_parse_errors, artifacts_indexed, reviews_indexed, help_requests_indexed}."""
    require_workspace(root)

    def body(conn: sqlite3.Connection, _created: bool) -> SyncCounts:
        for table in ALL_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        _script(conn, TABLES + OWN_TABLES + OWN_EVENT_INDEXES)
        return _bulk_sync(conn, root)

    counts = _write(root, body)
    return {"db_path": str(db_path(root)), "runs_indexed": counts.runs_upserted,
            "events_indexed": counts.events.indexed,
            "event_parse_errors": counts.events.errors_indexed,
            "artifacts_indexed": counts.artifacts_upserted,
            "reviews_indexed": counts.reviews_upserted,
            "help_requests_indexed": counts.help_requests_upserted}


def sync_index(root: Path) -> dict[str, Any]:
    """Bring the index up to date (made if missing): {db_path, db_created, runs_upserted,
    runs_deleted, events_indexed, events_deleted, event_parse_errors_indexed,
    event_parse_errors_deleted, artifacts_/reviews_/help_requests_ upserted/deleted}."""
    require_workspace(root)

    def body(conn: sqlite3.Connection, created: bool) -> tuple[bool, SyncCounts]:
        empty = conn.execute("SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM events LIMIT 1)) + "
                             "(SELECT COUNT(*) FROM (SELECT 1 FROM event_parse_errors "
                             "LIMIT 1))").fetchone()[0] == 0
        return created, (_bulk_sync(conn, root) if empty else sync_all(conn, root))

    created, counts = _write(root, body)
    return {"db_path": str(db_path(root)), "db_created": created, **counts.as_result()}


def refresh(root: Path, refresh_index: bool | None, sync: bool | None) -> tuple[bool, bool]:
    """The snapshots' policy: rebuild when asked or when there is no index, else sync
    unless `sync` is False. (rebuilt, synced)."""
    if refresh_index or not db_path(root).exists():
        rebuild_index(root)
        return True, False
    if sync is not False:
        sync_index(root)
        return False, True
    return False, False


# -- reading -------------------------------------------------------------------------------

def read(root: Path, query: Callable[[sqlite3.Connection], T]) -> T:
    """`query(conn)` on the index in one read transaction (one consistent view); a damaged
    index is rebuilt first. CompanyError if there is no index."""
    try:
        return _read_once(root, query)
    except sqlite3.DatabaseError as exc:
        if not is_corruption(exc):
            raise
        log.warning("the index %s is damaged (%s); rebuilding it", db_path(root), exc)
    rebuild_index(root)
    return _read_once(root, query)


def _read_once(root: Path, query: Callable[[sqlite3.Connection], T]) -> T:
    conn = open_for_read(root)
    try:
        conn.execute("BEGIN")
        try:
            return query(conn)
        finally:
            if conn.in_transaction:  # (it only read)
                conn.execute("ROLLBACK")
    finally:
        conn.close()


def rows(conn: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, args)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor]


def _where(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    """`WHERE a = ? AND …` of the filters given (None: not a filter)."""
    used = {name: value for name, value in filters.items() if value is not None}
    if not used:
        return "", []
    return "WHERE " + " AND ".join(f"{name} = ?" for name in used), list(used.values())


def index_stats(root: Path) -> dict[str, int]:
    tables = ("runs", "events", "event_parse_errors", "artifacts", "reviews", "help_requests")
    return read(root, lambda conn: {
        table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables})


def list_runs(root: Path, project_id: str | None = None, status: str | None = None,
              limit: int = 200) -> list[dict[str, Any]]:
    where, args = _where({"project_id": project_id, "status": status})
    return read(root, lambda conn: rows(
        conn, "SELECT project_id, run_id, created_at, status, provider, agent_id, "
        f"context_pack_id FROM runs {where} ORDER BY created_at DESC LIMIT ?", [*args, limit]))


def list_events(root: Path, project_id: str | None = None, run_id: str | None = None,
                type_: str | None = None, since_seq: int | None = None, limit: int = 500,
                order: Order = "desc") -> list[dict[str, Any]]:
    """Events as rows (payload_json and raw_json are JSON text), by wallclock then seq."""
    where, args = _where({"project_id": project_id, "run_id": run_id, "type": type_})
    if since_seq is not None:
        where = f"{where} AND seq > ?" if where else "WHERE seq > ?"
        args.append(since_seq)
    direction = "ASC" if order == "asc" else "DESC"
    sql = (f"SELECT {EVENT_COLUMNS} FROM events {where} "
           f"ORDER BY {_EVENT_ORDER.format(direction)} LIMIT ?")
    return read(root, lambda conn: rows(conn, sql, [*args, limit]))


def recent_events(root: Path, *, project_id: str | None = None, run_id: str | None = None,
                  event_types: Sequence[str] | None = None, limit: int,
                  sync: bool = True) -> list[dict[str, Any]]:
    """The `limit` most recent events matching every filter (applied before the limit), in
    ascending order (list_events' order): [{project_id, run_id, seq, event}] with the event
    as its line's object. The index is synced first (made if missing) unless `sync` is
    False."""
    return backfill(root, project_id=project_id, run_id=run_id, event_types=event_types,
                    limit=limit, sync=sync)[0]


def backfill(root: Path, *, project_id: str | None = None, run_id: str | None = None,
             event_types: Sequence[str] | None = None, limit: int, sync: bool = True
             ) -> tuple[list[dict[str, Any]], dict[str, FileCursor]]:
    """`recent_events`, and where the index stopped in each run's events file when it read
    them ("<project_id>/<run_id>": cursor), from one consistent view of the index: a reader
    that goes on from those positions neither misses nor repeats an event."""
    if sync:
        sync_index(root)
    base = {"project_id": project_id, "run_id": run_id}
    # One query a type (a range of an index each), merged: `type IN (…)` would sort them all.
    kinds: list[str | None] = list(dict.fromkeys(event_types)) if event_types is not None \
        else [None]

    def query(conn: sqlite3.Connection
              ) -> tuple[list[tuple[Any, ...]], dict[str, FileCursor]]:
        found: list[tuple[Any, ...]] = []
        for kind in kinds:
            where, args = _where({**base, "type": kind})
            found += conn.execute(
                f"SELECT ts_wallclock, seq, run_id, project_id, raw_json FROM events {where} "
                f"ORDER BY {_EVENT_ORDER.format('DESC')} LIMIT ?", [*args, limit]).fetchall()
        cursors = {f"{pid}/{rid}": FileCursor(offset, ino) for pid, rid, offset, ino in
                   conn.execute("SELECT project_id, run_id, byte_offset, ino "
                                "FROM ralph_event_cursors")}
        return found, cursors

    found, cursors = read(root, query)
    found.sort(key=lambda row: (row[0] is not None, row[0] or "", row[1], row[2], row[3]))
    return [{"project_id": pid, "run_id": rid, "seq": seq, "event": parse_json(raw)}
            for _ts, seq, rid, pid, raw in found[-limit:]], cursors


def list_event_parse_errors(root: Path, project_id: str | None = None,
                            run_id: str | None = None, limit: int = 200
                            ) -> list[dict[str, Any]]:
    where, args = _where({"project_id": project_id, "run_id": run_id})
    return read(root, lambda conn: rows(
        conn, f"SELECT project_id, run_id, seq, error, raw_line FROM event_parse_errors {where} "
        "ORDER BY run_id DESC, seq DESC LIMIT ?", [*args, limit]))


def list_reviews(root: Path, project_id: str | None = None, decision: str | None = None,
                 limit: int = 200) -> list[dict[str, Any]]:
    where, args = _where({"project_id": project_id, "decision": decision})
    return read(root, lambda conn: rows(
        conn, "SELECT review_id, created_at, decision, actor_id, actor_role, subject_kind, "
        f"subject_artifact_id, project_id, notes FROM reviews {where} "
        "ORDER BY created_at DESC LIMIT ?", [*args, limit]))


def list_help_requests(root: Path, target_manager: str | None = None,
                       project_id: str | None = None, limit: int = 200
                       ) -> list[dict[str, Any]]:
    where, args = _where({"target_manager": target_manager, "project_id": project_id})
    return read(root, lambda conn: rows(
        conn, "SELECT help_request_id, created_at, title, visibility, requester, "
        f"target_manager, project_id, share_pack_id FROM help_requests {where} "
        "ORDER BY created_at DESC LIMIT ?", [*args, limit]))
