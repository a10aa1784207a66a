"""Indexing one run's `events.jsonl` into the `events` and `event_parse_errors` tables,
incrementally: from where the last sync stopped (Ralph's cursor), or, in a file without
cursors (AgentCompany wrote it), from AgentCompany's rule (after the highest seq indexed).

`seq` is a line's 1-based position among the file's non-blank lines. A line that is not JSON
is a parse error with its seq; JSON that is not an object is an event of type "unknown".
Only complete lines are indexed: a last line without its newline may be half-written, so it
waits for the next sync instead of becoming a parse error that would outlive its completion.
A file that was replaced, shrank or was rewritten in place is indexed again from its start.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from ralph.company.events import parse_json
from ralph.store.lines import FileCursor, complete_lines, line_end, read_mark, replaced_or_shrunk

log = logging.getLogger("ralph.company.index")

_BATCH = 5000
_INT64 = 2 ** 63
# What JavaScript's String.prototype.trim removes (blank lines are not counted).
_JS_SPACE = ("\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
             "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
_ASCII_SPACE = b"\t\n\x0b\x0c\r "

Key = tuple[str, str]


@dataclass
class Cursor:
    """A row of ralph_event_cursors."""

    offset: int
    seq: int
    ino: int
    size: int
    mtime_ns: int
    mark: bytes


@dataclass
class EventCounts:
    indexed: int = 0
    deleted: int = 0
    errors_indexed: int = 0
    errors_deleted: int = 0


def load_cursors(conn: sqlite3.Connection) -> dict[Key, tuple[Any, ...]]:
    """Every run's cursor row (offset, seq, ino, size, mtime_ns, mark), kept as a tuple: a
    sync of an unchanged workspace only compares three of its fields."""
    return {(row[0], row[1]): row[2:] for row in conn.execute(
        "SELECT project_id, run_id, byte_offset, seq, ino, size, mtime_ns, mark "
        "FROM ralph_event_cursors")}


def forget_run_events(conn: sqlite3.Connection, key: Key, counts: EventCounts,
                      from_seq: int = 1) -> None:
    """Delete a run's events and parse errors from `from_seq` on."""
    counts.deleted += conn.execute(
        "DELETE FROM events WHERE project_id = ? AND run_id = ? AND seq >= ?",
        (*key, from_seq)).rowcount
    counts.errors_deleted += conn.execute(
        "DELETE FROM event_parse_errors WHERE project_id = ? AND run_id = ? AND seq >= ?",
        (*key, from_seq)).rowcount


def drop_cursor(conn: sqlite3.Connection, key: Key) -> None:
    conn.execute("DELETE FROM ralph_event_cursors WHERE project_id = ? AND run_id = ?", key)


def _max_seqs(conn: sqlite3.Connection, key: Key) -> tuple[int, int]:
    event = conn.execute("SELECT MAX(seq) FROM events WHERE project_id = ? AND run_id = ?",
                         key).fetchone()[0] or 0
    error = conn.execute("SELECT MAX(seq) FROM event_parse_errors WHERE project_id = ? "
                         "AND run_id = ?", key).fetchone()[0] or 0
    return int(event), int(error)


def _still_indexed(conn: sqlite3.Connection, key: Key, seq: int) -> bool:
    """Whether the run's rows still reach `seq` (one primary-key seek in the usual case: the
    last line is an event)."""
    last = conn.execute("SELECT MAX(seq) FROM events WHERE project_id = ? AND run_id = ?",
                        key).fetchone()[0] or 0
    return last == seq or (last < seq and max(_max_seqs(conn, key)) == seq)


def sync_run_events(conn: sqlite3.Connection, key: Key, path: str,
                    row: tuple[Any, ...] | None, counts: EventCounts, *,
                    empty_index: bool = False) -> None:
    """Bring the index of one run's events file (at `path`) up to date."""
    try:
        st = os.stat(path)  # noqa: PTH116 (a string path: hot loop of a sync)
    except FileNotFoundError:
        # (AgentCompany keeps a run's events when its file is gone; they are gone, too.)
        forget_run_events(conn, key, counts)
        drop_cursor(conn, key)
        return
    except OSError as exc:
        log.warning("cannot read %s (%s); its index is left as it was", path, exc)
        return
    if (not empty_index and row is not None
            and row[2:5] == (st.st_ino, st.st_size, st.st_mtime_ns)
            and _still_indexed(conn, key, row[1])):
        # Not touched since the last sync, and its rows are still there (AgentCompany's own
        # sync, which does not know the cursor, may have deleted them).
        return
    cursor = None if row is None else Cursor(row[0], row[1], row[2], row[3], row[4],
                                             bytes(row[5]))
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        log.warning("cannot read %s (%s); its index is left as it was", path, exc)
        return
    with handle:
        st = os.fstat(handle.fileno())
        offset, seq = _start(conn, key, handle, st, cursor, counts, empty_index)
        offset, seq = _index_lines(conn, key, handle, offset, st.st_size, seq, counts)
        conn.execute(
            "INSERT OR REPLACE INTO ralph_event_cursors (project_id, run_id, byte_offset, seq, "
            "ino, size, mtime_ns, mark) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*key, offset, seq, st.st_ino, st.st_size, st.st_mtime_ns,
             read_mark(handle.fileno(), offset)))


def _start(conn: sqlite3.Connection, key: Key, handle: BinaryIO, st: os.stat_result,
           cursor: Cursor | None, counts: EventCounts, empty_index: bool) -> tuple[int, int]:
    """(byte offset, seq of the last line before it) to index the file from, after deleting
    whatever indexed rows are not the file's from there on."""
    if empty_index:
        return 0, 0
    if cursor is not None:
        changed = replaced_or_shrunk(FileCursor(cursor.offset, cursor.ino, cursor.mark), st,
                                     handle.fileno())
        if changed is not None:
            log.info("events of run %s/%s %s; indexing them again", *key, changed)
            forget_run_events(conn, key, counts)
            return 0, 0
        # The rows must be exactly the cursor's lines: anything past them was written by
        # someone else (AgentCompany's sync indexing a half-written line) and is redone.
        if max(_max_seqs(conn, key)) == cursor.seq:
            return cursor.offset, cursor.seq
        forget_run_events(conn, key, counts, cursor.seq + 1)
        if max(_max_seqs(conn, key)) == cursor.seq:
            return cursor.offset, cursor.seq
    return _resume_by_seq(conn, key, handle, st.st_size, counts)


def _resume_by_seq(conn: sqlite3.Connection, key: Key, handle: BinaryIO, size: int,
                   counts: EventCounts) -> tuple[int, int]:
    """AgentCompany's rule, for a run without a (trustworthy) cursor: resume after the
    highest seq indexed; from the start if the file has fewer lines than that (truncated).
    A last row that is a parse error is redone (it may have been a half-written line)."""
    event_max, error_max = _max_seqs(conn, key)
    indexed = max(event_max, error_max)
    if indexed == 0:
        return 0, 0
    redo = indexed if error_max > event_max else indexed + 1
    seq, offset, resume = 0, 0, None
    for start, line in complete_lines(handle, 0, size):
        if _blank(line):
            continue
        seq += 1
        if seq == redo:
            resume = (start, seq - 1)
        offset = line_end(start, line)
    torn = _torn_tail(handle, offset, size)
    if indexed > seq + torn:
        log.info("events of run %s/%s are shorter than indexed; indexing them again", *key)
        forget_run_events(conn, key, counts)
        return 0, 0
    if resume is None:  # everything complete is indexed (a torn tail was, too: redone)
        resume = (offset, seq)
    forget_run_events(conn, key, counts, resume[1] + 1)
    return resume


def _torn_tail(handle: BinaryIO, offset: int, size: int) -> int:
    handle.seek(offset)
    return 0 if _blank(handle.read(size - offset)) else 1


def _blank(line: bytes) -> bool:
    stripped = line.strip(_ASCII_SPACE)
    if not stripped:
        return True
    if stripped[0] < 0x80 and stripped[-1] < 0x80:
        return False
    return not line.decode("utf-8", "replace").strip(_JS_SPACE)


def _index_lines(conn: sqlite3.Connection, key: Key, handle: BinaryIO, offset: int,
                 size: int, seq: int, counts: EventCounts) -> tuple[int, int]:
    """Index the complete lines in [offset, size), numbered after `seq`: (offset, seq) after
    the last of them."""
    pid, rid = key
    events: list[tuple[Any, ...]] = []
    errors: list[tuple[Any, ...]] = []
    for start, line in complete_lines(handle, offset, size):
        offset = line_end(start, line)
        if _blank(line):
            continue
        seq += 1
        text = line.decode("utf-8", "replace")
        try:
            value = parse_json(text)
        except ValueError as exc:
            errors.append((pid, rid, seq, str(exc), text))
        else:
            events.append(_event_row(pid, rid, seq, value, text))
        if len(events) + len(errors) >= _BATCH:
            _flush(conn, events, errors, counts)
    _flush(conn, events, errors, counts)
    return offset, seq


def _event_row(pid: str, rid: str, seq: int, value: Any, text: str) -> tuple[Any, ...]:
    """The `events` row of a parsed line, as AgentCompany fills it: a field of the wrong
    type is NULL, a missing type "unknown", the payload's JSON `null` when it has none."""
    if not isinstance(value, dict):
        return (pid, rid, seq, "unknown", None, None, None, None, None, "null", text)
    kind = value.get("type")
    payload = orjson.dumps(value.get("payload")).decode()
    return (pid, rid, seq, kind if isinstance(kind, str) else "unknown",
            _str(value.get("ts_wallclock")), _whole(value.get("ts_monotonic_ms")),
            _str(value.get("actor")), _str(value.get("session_ref")),
            _str(value.get("visibility")), payload, text)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _whole(value: Any) -> int | None:
    """Math.floor of a JSON number (NULL if it is not one SQLite can hold)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = math.floor(value)
    return value if -_INT64 <= value < _INT64 else None


def _flush(conn: sqlite3.Connection, events: list[tuple[Any, ...]],
           errors: list[tuple[Any, ...]], counts: EventCounts) -> None:
    if events:
        conn.executemany(
            "INSERT OR REPLACE INTO events (project_id, run_id, seq, type, ts_wallclock, "
            "ts_monotonic_ms, actor, session_ref, visibility, payload_json, raw_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", events)
        counts.indexed += len(events)
        events.clear()
    if errors:
        conn.executemany(
            "INSERT OR REPLACE INTO event_parse_errors (project_id, run_id, seq, error, "
            "raw_line) VALUES (?, ?, ?, ?, ?)", errors)
        counts.errors_indexed += len(errors)
        errors.clear()
