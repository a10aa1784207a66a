"""What a monitoring client shows, from the index: `monitor.snapshot` (runs with their live
sessions, last event and parse-error count), `inbox.snapshot` (artifacts waiting for a review,
recent decisions) and `ui.snapshot` (both, the index refreshed once).

Each first refreshes the index (ralph.company.index.refresh: rebuilt when asked or missing,
else synced unless `sync_index` is false) and then reads it in one read transaction, so its
parts agree with each other. Live sessions come in as plain data (session.list's rows): the
service knows nothing of the process that runs them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ralph.company.index import read, refresh, rows
from ralph.company.workspace import now_iso

DEFAULT_LIMIT = 200
Key = tuple[str, str]
_RUN_COLUMNS = "project_id, run_id, created_at, status, provider, agent_id, context_pack_id"


def monitor_snapshot(root: Path, sessions: Sequence[dict[str, Any]], *,
                     project_id: str | None = None, limit: int | None = None,
                     refresh_index: bool | None = None, sync_index: bool | None = None
                     ) -> dict[str, Any]:
    """{workspace_dir, generated_at, index_rebuilt, index_synced, rows}: the `limit` newest
    indexed runs, every run with a live session and every session not indexed yet; running
    sessions first, then newest first, then by run id."""
    rebuilt, synced = refresh(root, refresh_index, sync_index)
    found = read(root, lambda conn: _monitor_rows(conn, sessions, project_id,
                                                  limit or DEFAULT_LIMIT))
    return {"workspace_dir": str(root), "generated_at": now_iso(), "index_rebuilt": rebuilt,
            "index_synced": synced, "rows": found}


def _monitor_rows(conn: sqlite3.Connection, sessions: Sequence[dict[str, Any]],
                  project_id: str | None, limit: int) -> list[dict[str, Any]]:
    live: dict[Key, dict[str, Any]] = {}
    for session in sessions:  # newest first (session.list's order): a run's newest is shown
        if project_id is None or session.get("project_id") == project_id:
            live.setdefault((session["project_id"], session["run_id"]), session)
    where, args = ("WHERE project_id = ?", [project_id]) if project_id else ("", [])
    runs = rows(conn, f"SELECT {_RUN_COLUMNS} FROM runs {where} ORDER BY created_at DESC "
                "LIMIT ?", [*args, limit])
    listed = {(run["project_id"], run["run_id"]) for run in runs}
    # A run with a session is shown even if older than the newest `limit` (running first).
    for key in live.keys() - listed:
        runs += rows(conn, f"SELECT {_RUN_COLUMNS} FROM runs WHERE project_id = ? AND "
                     "run_id = ?", key)
    out: list[dict[str, Any]] = []
    for run in runs:
        key = (run["project_id"], run["run_id"])
        row: dict[str, Any] = {"project_id": key[0], "run_id": key[1],
                               "created_at": run["created_at"], "run_status": run["status"],
                               "provider": run["provider"], "agent_id": run["agent_id"],
                               "context_pack_id": run["context_pack_id"]}
        row.update(_live_fields(live.get(key)))
        last = conn.execute("SELECT seq, type, ts_wallclock, actor, visibility FROM events "
                            "WHERE project_id = ? AND run_id = ? ORDER BY seq DESC LIMIT 1",
                            key).fetchone()
        if last is not None:
            row["last_event"] = dict(zip(("seq", "type", "ts_wallclock", "actor",
                                          "visibility"), last, strict=True))
        row["parse_error_count"] = _parse_errors(conn, key)
        out.append(row)
    indexed = {(run["project_id"], run["run_id"]) for run in runs}
    for key, session in live.items():
        if key not in indexed:  # a session of a run not indexed yet
            out.append({"project_id": key[0], "run_id": key[1],
                        "run_status": session.get("status"), **_live_fields(session),
                        "parse_error_count": _parse_errors(conn, key)})
    out.sort(key=lambda row: row["run_id"])
    out.sort(key=lambda row: row.get("created_at") or "", reverse=True)
    out.sort(key=lambda row: row.get("live_status") != "running")
    return out[:limit]


def _live_fields(session: dict[str, Any] | None) -> dict[str, Any]:
    """A session's columns of a monitor row (none without a session; absent ones omitted)."""
    if session is None:
        return {}
    fields = {"session_ref": session.get("session_ref"), "live_status": session.get("status")}
    for name, column in (("exit_code", "live_exit_code"), ("signal", "live_signal")):
        if name in session:
            fields[column] = session[name]
    for name, column in (("error", "live_error"), ("started_at_ms", "session_started_at_ms"),
                         ("ended_at_ms", "session_ended_at_ms")):
        if session.get(name) is not None:
            fields[column] = session[name]
    return fields


def _parse_errors(conn: sqlite3.Connection, key: Key) -> int:
    count: int = conn.execute("SELECT COUNT(*) FROM event_parse_errors WHERE project_id = ? "
                              "AND run_id = ?", key).fetchone()[0]
    return count


_PENDING = """
SELECT a.project_id, a.artifact_id, a.type AS artifact_type, a.title, a.visibility,
       a.produced_by, a.run_id, a.created_at
FROM artifacts a
WHERE ((a.type = 'memory_delta' AND NOT EXISTS (
          SELECT 1 FROM reviews r WHERE r.project_id = a.project_id
          AND r.subject_artifact_id = a.artifact_id AND r.subject_kind = 'memory_delta'))
    OR (a.type = 'milestone_report' AND NOT EXISTS (
          SELECT 1 FROM reviews r WHERE r.project_id = a.project_id
          AND r.subject_artifact_id = a.artifact_id AND r.subject_kind = 'milestone')))
  {project}
ORDER BY a.created_at DESC, a.artifact_id DESC
LIMIT ?
"""
_DECISIONS = """
SELECT r.review_id, r.created_at, r.decision, r.actor_id, r.actor_role, r.subject_kind,
       r.subject_artifact_id, r.project_id, r.notes, a.type AS artifact_type,
       a.run_id AS run_id
FROM reviews r
LEFT JOIN artifacts a ON a.project_id = r.project_id AND a.artifact_id = r.subject_artifact_id
{project}
ORDER BY r.created_at DESC, r.review_id DESC
LIMIT ?
"""


def inbox_snapshot(root: Path, *, project_id: str | None = None,
                   pending_limit: int | None = None, decisions_limit: int | None = None,
                   refresh_index: bool | None = None, sync_index: bool | None = None
                   ) -> dict[str, Any]:
    """{workspace_dir, generated_at, index_rebuilt, index_synced, pending,
    recent_decisions}: memory deltas and milestone reports without their review, newest
    first, and the newest reviews, each with its run's parse-error count."""
    rebuilt, synced = refresh(root, refresh_index, sync_index)

    def query(conn: sqlite3.Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        args = [project_id] if project_id else []
        pending = rows(conn, _PENDING.format(
            project="AND a.project_id = ?" if project_id else ""),
            [*args, pending_limit or DEFAULT_LIMIT])
        decisions = rows(conn, _DECISIONS.format(
            project="WHERE r.project_id = ?" if project_id else ""),
            [*args, decisions_limit or DEFAULT_LIMIT])
        counts = {(pid, rid): n for pid, rid, n in conn.execute(
            "SELECT project_id, run_id, COUNT(*) FROM event_parse_errors "
            f"{'WHERE project_id = ?' if project_id else ''} GROUP BY project_id, run_id",
            args)}
        for item in (*pending, *decisions):
            item["parse_error_count"] = counts.get((item["project_id"], item["run_id"]), 0) \
                if item["run_id"] else 0
        return pending, decisions

    pending, decisions = read(root, query)
    return {"workspace_dir": str(root), "generated_at": now_iso(), "index_rebuilt": rebuilt,
            "index_synced": synced, "pending": pending, "recent_decisions": decisions}


def ui_snapshot(root: Path, sessions: Sequence[dict[str, Any]], *,
                project_id: str | None = None, monitor_limit: int | None = None,
                pending_limit: int | None = None, decisions_limit: int | None = None,
                refresh_index: bool | None = None, sync_index: bool | None = None
                ) -> dict[str, Any]:
    """{workspace_dir, generated_at, monitor, review_inbox}: the index is refreshed once (by
    the monitor) and the inbox reports the same flags. The two parts are two reads: a sync
    by another process between them may show in the inbox only."""
    monitor = monitor_snapshot(root, sessions, project_id=project_id, limit=monitor_limit,
                               refresh_index=refresh_index, sync_index=sync_index)
    inbox = inbox_snapshot(root, project_id=project_id, pending_limit=pending_limit,
                           decisions_limit=decisions_limit, refresh_index=False,
                           sync_index=False)
    inbox["index_rebuilt"] = monitor["index_rebuilt"]
    inbox["index_synced"] = monitor["index_synced"]
    return {"workspace_dir": str(root), "generated_at": now_iso(), "monitor": monitor,
            "review_inbox": inbox}
