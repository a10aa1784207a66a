"""One sync of the AgentCompany index with the workspace's files, inside the caller's write
transaction: every valid run (`run.yaml`) and its events, every artifact with an id and a
type, every valid review and help request; rows whose source is gone (or no longer valid)
are deleted. The sources are those AgentCompany indexes, read as it reads them.

A source file whose signature (inode, size, mtime, ctime) is the one recorded at the last
sync is not read again: a sync of an unchanged workspace reads directory listings, not
files. Counters count as AgentCompany counts: `*_upserted` is every valid source found.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ralph.company.files import FileFormatError, load_yaml, read_text, split_front_matter
from ralph.company.index_events import (
    EventCounts,
    Key,
    drop_cursor,
    forget_run_events,
    load_cursors,
    sync_run_events,
)
from ralph.company.layout import EVENTS_FILE, HELP_REQUESTS, PROJECTS, REVIEWS
from ralph.company.schemas import HelpRequestFrontMatter, ReviewYaml, RunYaml, schema_issues

log = logging.getLogger("ralph.company.index")

Sig = tuple[int, int, int, int]
Row = tuple[Any, ...]


@dataclass
class SyncCounts:
    runs_upserted: int = 0
    runs_deleted: int = 0
    events: EventCounts = field(default_factory=EventCounts)
    artifacts_upserted: int = 0
    artifacts_deleted: int = 0
    reviews_upserted: int = 0
    reviews_deleted: int = 0
    help_requests_upserted: int = 0
    help_requests_deleted: int = 0

    def as_result(self) -> dict[str, int]:
        return {
            "runs_upserted": self.runs_upserted, "runs_deleted": self.runs_deleted,
            "events_indexed": self.events.indexed, "events_deleted": self.events.deleted,
            "event_parse_errors_indexed": self.events.errors_indexed,
            "event_parse_errors_deleted": self.events.errors_deleted,
            "artifacts_upserted": self.artifacts_upserted,
            "artifacts_deleted": self.artifacts_deleted,
            "reviews_upserted": self.reviews_upserted, "reviews_deleted": self.reviews_deleted,
            "help_requests_upserted": self.help_requests_upserted,
            "help_requests_deleted": self.help_requests_deleted,
        }


@dataclass(frozen=True)
class _Table:
    """How a source's row is stored: its table, key columns and other columns."""

    name: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]

    def load(self, conn: sqlite3.Connection) -> dict[Key, Row]:
        cols = ", ".join(self.keys + self.columns)
        return {self.key_of(row): tuple(row)
                for row in conn.execute(f"SELECT {cols} FROM {self.name}")}

    def key_of(self, row: Row) -> Key:
        return (row[0], row[1]) if len(self.keys) == 2 else (row[0], "")

    def upsert(self, conn: sqlite3.Connection, row: Row) -> None:
        cols = self.keys + self.columns
        conn.execute(f"INSERT OR REPLACE INTO {self.name} ({', '.join(cols)}) "
                     f"VALUES ({', '.join('?' * len(cols))})", row)

    def delete(self, conn: sqlite3.Connection, key: Key) -> int:
        where = " AND ".join(f"{name} = ?" for name in self.keys)
        return conn.execute(f"DELETE FROM {self.name} WHERE {where}",
                            key[:len(self.keys)]).rowcount


RUNS = _Table("runs", ("project_id", "run_id"), ("created_at", "status", "provider",
                                                 "agent_id", "context_pack_id",
                                                 "events_relpath"))
ARTIFACTS = _Table("artifacts", ("project_id", "artifact_id"), (
    "type", "title", "visibility", "produced_by", "run_id", "context_pack_id", "created_at",
    "relpath"))
REVIEW_ROWS = _Table("reviews", ("review_id",), (
    "created_at", "decision", "actor_id", "actor_role", "subject_kind", "subject_artifact_id",
    "project_id", "notes"))
HELP_ROWS = _Table("help_requests", ("help_request_id",), (
    "created_at", "title", "visibility", "requester", "target_manager", "project_id",
    "share_pack_id"))


class _Sources:
    """The recorded signature of each source file, and the ones seen by this sync."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.known: dict[str, tuple[Sig, Key | None]] = {
            rel: ((ino, size, mtime, ctime), None if k1 is None else (k1, k2 or ""))
            for rel, ino, size, mtime, ctime, k1, k2 in conn.execute(
                "SELECT relpath, ino, size, mtime_ns, ctime_ns, key1, key2 "
                "FROM ralph_index_sources")}
        self.seen: set[str] = set()

    def unchanged(self, rel: str, sig: Sig, rows: dict[Key, Row]) -> tuple[bool, Key | None]:
        """(whether `rel` is as at the last sync and its row, if any, is still there, its key)"""
        self.seen.add(rel)
        known = self.known.get(rel)
        if known is None or known[0] != sig:
            return False, None
        return (known[1] is None or known[1] in rows), known[1]

    def record(self, rel: str, sig: Sig, key: Key | None) -> None:
        if self.known.get(rel) == (sig, key):
            return
        self.conn.execute(
            "INSERT OR REPLACE INTO ralph_index_sources (relpath, ino, size, mtime_ns, "
            "ctime_ns, key1, key2) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (rel, *sig, *(key if key is not None else (None, None))))

    def forget_unseen(self) -> None:
        gone = [(rel,) for rel in self.known if rel not in self.seen]
        self.conn.executemany("DELETE FROM ralph_index_sources WHERE relpath = ?", gone)


def sync_all(conn: sqlite3.Connection, root: Path, *, empty: bool = False) -> SyncCounts:
    """Sync every table with the workspace at `root` (`empty`: the tables are empty now)."""
    counts = SyncCounts()
    sources = _Sources(conn)
    runs, artifacts = RUNS.load(conn), ARTIFACTS.load(conn)
    cursors = load_cursors(conn)
    seen_runs: set[Key] = set()
    seen_artifacts: set[Key] = set()
    # Paths as strings in these loops: pathlib costs more than the stat calls themselves.
    base = str(root)
    for pid in _names(f"{base}/{PROJECTS}", dirs=True):
        project = f"{base}/{PROJECTS}/{pid}"
        for rid in _names(f"{project}/runs", dirs=True):
            rel = f"{PROJECTS}/{pid}/runs/{rid}/run.yaml"
            key = _source(conn, root, rel, sources, RUNS, runs, partial(_run_row, pid))
            if key is None:
                continue
            if key in seen_runs:
                log.warning("%s names run %s, indexed already from another directory; "
                            "skipped", rel, key[1])
                continue
            seen_runs.add(key)
            counts.runs_upserted += 1
            sync_run_events(conn, key, f"{project}/runs/{rid}/{EVENTS_FILE}",
                            cursors.get(key), counts.events, empty_index=empty)
        for name in _names(f"{project}/artifacts", suffix=".md"):
            rel = f"{PROJECTS}/{pid}/artifacts/{name}"
            key = _source(conn, root, rel, sources, ARTIFACTS, artifacts,
                          partial(_artifact_row, pid, rel))
            if key is not None:
                seen_artifacts.add(key)
                counts.artifacts_upserted += 1
    for key in runs.keys() - seen_runs:
        forget_run_events(conn, key, counts.events)
        drop_cursor(conn, key)
        counts.runs_deleted += RUNS.delete(conn, key)
    for key in cursors.keys() - seen_runs - runs.keys():
        drop_cursor(conn, key)
    for key in artifacts.keys() - seen_artifacts:
        counts.artifacts_deleted += ARTIFACTS.delete(conn, key)
    counts.reviews_upserted, counts.reviews_deleted = _sync_inbox(
        conn, root, sources, REVIEWS, ".yaml", REVIEW_ROWS, _review_row)
    counts.help_requests_upserted, counts.help_requests_deleted = _sync_inbox(
        conn, root, sources, HELP_REQUESTS, ".md", HELP_ROWS, _help_row)
    sources.forget_unseen()
    return counts


def _sync_inbox(conn: sqlite3.Connection, root: Path, sources: _Sources, folder: str,
                suffix: str, table: _Table, parse: Callable[[str], Row | None]
                ) -> tuple[int, int]:
    rows = table.load(conn)
    seen: set[Key] = set()
    for name in _names(f"{root}/{folder}", suffix=suffix):
        key = _source(conn, root, f"{folder}/{name}", sources, table, rows, parse)
        if key is not None:
            seen.add(key)
    deleted = sum(table.delete(conn, key) for key in rows.keys() - seen)
    return len(seen), deleted


def _source(conn: sqlite3.Connection, root: Path, rel: str, sources: _Sources, table: _Table,
            rows: dict[Key, Row], parse: Callable[[str], Row | None]) -> Key | None:
    """The key of the row source file `rel` gives (read and stored only if it changed), or
    None if it gives none (missing, unreadable, not valid)."""
    try:
        st = os.stat(f"{root}/{rel}")  # noqa: PTH116 (hot loop, see sync_all)
    except OSError:
        return None
    sig: Sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    same, key = sources.unchanged(rel, sig, rows)
    if same:
        return key
    try:
        row = parse(read_text(Path(root, rel)))
    except OSError:
        return None
    if row is None:
        sources.record(rel, sig, None)
        return None
    key = table.key_of(row)
    if rows.get(key) != row:
        table.upsert(conn, row)
        rows[key] = row
    sources.record(rel, sig, key)
    return key


def _names(folder: str, *, dirs: bool = False, suffix: str = "") -> Iterator[str]:
    """The directories (or files ending in `suffix`) in `folder`, by name; links are
    neither (as AgentCompany lists them)."""
    try:
        with os.scandir(folder) as entries:
            found = [e.name for e in entries if _kind(e, dirs) and e.name.endswith(suffix)]
    except OSError:
        return iter(())
    return iter(sorted(found, key=os.fsencode))


def _kind(entry: os.DirEntry[str], dirs: bool) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False) if dirs else entry.is_file(
            follow_symlinks=False)
    except OSError:
        return False


def _yaml(text: str) -> Any:
    try:
        return load_yaml(text, "")
    except FileFormatError:
        return None


def _run_row(pid: str, text: str) -> Row | None:
    data = _yaml(text)
    if schema_issues(RunYaml, data):
        return None
    return (pid, data["id"], data["created_at"], data["status"], data["provider"],
            data["agent_id"], data["context_pack_id"], data["events_relpath"])


def _artifact_row(pid: str, rel: str, text: str) -> Row | None:
    try:
        data, _body = split_front_matter(text, rel)
    except FileFormatError:
        return None
    if not isinstance(data, dict):
        return None
    artifact_id, kind = data.get("id"), data.get("type")
    if not (isinstance(artifact_id, str) and artifact_id.strip() and isinstance(kind, str)
            and kind.strip()):
        return None

    def text_or_none(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) else None

    return (pid, artifact_id, kind, text_or_none("title"), text_or_none("visibility"),
            text_or_none("produced_by"), text_or_none("run_id"),
            text_or_none("context_pack_id"), text_or_none("created_at"), rel)


def _review_row(text: str) -> Row | None:
    data = _yaml(text)
    if schema_issues(ReviewYaml, data):
        return None
    subject = data["subject"]
    return (data["id"], data["created_at"], data["decision"], data["actor_id"],
            data["actor_role"], subject["kind"], subject["artifact_id"], subject["project_id"],
            data.get("notes"))


_HELP_HEADINGS = [re.compile(rf"^\s*## {name}\s*$", re.IGNORECASE | re.MULTILINE)
                  for name in ("Question", "Response")]


def _help_row(text: str) -> Row | None:
    try:
        data, body = split_front_matter(text, "")
    except FileFormatError:
        return None
    if schema_issues(HelpRequestFrontMatter, data):
        return None
    if not all(pattern.search(body) for pattern in _HELP_HEADINGS):
        return None
    return (data["id"], data["created_at"], data["title"], data["visibility"],
            data["requester"], data["target_manager"], data.get("project_id"),
            data.get("share_pack_id"))
