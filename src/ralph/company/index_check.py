"""`workspace.doctor`'s index check (ralph.company.doctor takes it as `index_check`): rebuild
or sync the index when asked and report what was done, else report whether the index is
there, readable, and as new as the files it is made from (AgentCompany's ids, statuses and
messages)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

from ralph.company.doctor import check, index_is_stale
from ralph.company.index import index_stats, rebuild_index, sync_index
from ralph.company.index_db import db_path
from ralph.company.layout import CompanyError


def index_check(root: Path, rebuild: bool, sync: bool) -> dict[str, Any]:
    if rebuild:
        return _rebuilt(rebuild_index(root))
    if sync:
        synced = sync_index(root)
        errors = index_stats(root)["event_parse_errors"]
        return check("index.sync", "warn" if errors else "pass",
                     f"Index synced with {errors} event parse error(s)." if errors
                     else "Index synced successfully.",
                     [f"{key}: {_js(value)}" for key, value in synced.items()])
    if not db_path(root).exists():
        return check("index.rebuild", "warn",
                     "SQLite index is missing. Run index:rebuild for fast queries.")
    try:
        stats = index_stats(root)
        stale, index_ms, newest_ms = index_is_stale(root)
    except (CompanyError, OSError, sqlite3.Error) as exc:
        return check("index.rebuild", "fail", f"SQLite index exists but could not be read: {exc}")
    errors = stats["event_parse_errors"]
    message = ("SQLite index is readable but appears stale relative to canonical files."
               if stale else f"SQLite index loaded with {errors} event parse error(s)."
               if errors else "SQLite index is present and readable.")
    return check("index.rebuild", "warn" if stale or errors else "pass", message, [
        *(f"{key}: {value}" for key, value in stats.items()),
        f"index_mtime_ms: {math.floor(index_ms)}",
        f"canonical_latest_mtime_ms: {math.floor(newest_ms)}"])


def _rebuilt(result: dict[str, Any]) -> dict[str, Any]:
    errors = result["event_parse_errors"]
    return check("index.rebuild", "warn" if errors else "pass",
                 f"Index rebuilt with {errors} event parse error(s)." if errors
                 else "Index rebuilt successfully.",
                 [f"{key}: {result[key]}" for key in (
                     "db_path", "runs_indexed", "events_indexed", "artifacts_indexed",
                     "reviews_indexed", "help_requests_indexed")])


def _js(value: Any) -> str:
    """A value as JavaScript's template strings write it (`true`, not `True`)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
