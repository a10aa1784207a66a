"""Following a workspace's run events as they are appended, by any process: this server,
another server, `ac rpc:call`, an agent writing to its run.

A `Feed` holds a position (byte offset and inode) in each run's events file and reads the
complete lines appended after it; a line still being written (no newline yet) waits for
the next read, a file that was replaced or shrank is read again from its start. `Ack`s
keep a subscription's acknowledged positions in `.local/subscriptions/<id>.json`, so that a
subscription made again with the same id after a restart resumes after the last event its
client acknowledged.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ralph.company.events import parse_line
from ralph.company.layout import EVENTS_FILE, PROJECTS
from ralph.company.workspace import now_iso
from ralph.fsutil import atomic_write_bytes
from ralph.store.lines import (
    READ_CHUNK,
    FileCursor,
    complete_lines,
    line_end,
    replaced_or_shrunk,
)

ACKS_DIR = ".local/subscriptions"
_CHUNK = 256 * 1024
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


@dataclass(frozen=True)
class LiveEvent:
    """One event read from a run's events file, with where its line starts and ends."""

    key: str  # "<project_id>/<run_id>"
    project_id: str
    run_id: str
    start: int
    end: int
    ino: int  # the events file's inode
    event: dict[str, Any]


def run_key(project_id: str, run_id: str) -> str:
    return f"{project_id}/{run_id}"


def events_files(root: Path) -> Iterator[tuple[str, str, Path]]:
    """(project_id, run_id, events file) of every run directory that has an events file."""
    projects = root / PROJECTS
    try:
        project_entries = sorted(os.scandir(projects), key=lambda e: e.name)
    except OSError:
        return
    for project in project_entries:
        if not project.is_dir(follow_symlinks=False):
            continue
        try:
            runs = sorted(os.scandir(Path(project.path) / "runs"), key=lambda e: e.name)
        except OSError:
            continue
        for run in runs:
            path = Path(run.path) / EVENTS_FILE
            if run.is_dir(follow_symlinks=False) and path.is_file():
                yield project.name, run.name, path


def key_of(root: Path, path: Path) -> tuple[str, str] | None:
    """(project_id, run_id) of `<root>/work/projects/<p>/runs/<r>/events.jsonl`, else None."""
    try:
        parts = path.relative_to(root / PROJECTS).parts
    except ValueError:
        return None
    if len(parts) == 4 and parts[1] == "runs" and parts[3] == EVENTS_FILE:
        return parts[0], parts[2]
    return None


def end_cursor(path: Path) -> FileCursor | None:
    """The position after the last complete line of `path` (None if it is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        end = st.st_size
        while end > 0:
            start = max(0, end - _CHUNK)
            cut = os.pread(fd, end - start, start).rfind(b"\n")
            if cut >= 0:
                return FileCursor(start + cut + 1, st.st_ino)
            end = start
        return FileCursor(0, st.st_ino)
    finally:
        os.close(fd)


def read_appended(path: Path, cursor: FileCursor | None, budget: int = _CHUNK
                  ) -> tuple[list[tuple[int, bytes]], FileCursor | None]:
    """The complete lines after `cursor` (about `budget` bytes of them at most) as (start
    offset, line), and the cursor after them. A file replaced or shorter than the cursor is
    read from its start; a file that is gone gives nothing and None."""
    try:
        handle = path.open("rb")
    except OSError:
        return [], None
    with handle:
        st = os.fstat(handle.fileno())
        offset = cursor.offset if cursor is not None and \
            replaced_or_shrunk(cursor, st) is None else 0
        lines: list[tuple[int, bytes]] = []
        end = offset
        for start, line in complete_lines(handle, offset, st.st_size,
                                          chunk_size=min(budget, READ_CHUNK)):
            lines.append((start, line))
            end = line_end(start, line)
            if end - offset >= budget:
                break
        return lines, FileCursor(end, st.st_ino)


class Feed:
    """One reader's positions over a workspace's events files."""

    def __init__(self, root: Path, cursors: dict[str, FileCursor] | None = None, *,
                 from_start: bool = False) -> None:
        """Start at `cursors` where given; elsewhere at the current end of each events file
        (what is there now is history, not news), or at the start with `from_start`."""
        self.root = root
        self.cursors: dict[str, FileCursor] = dict(cursors or {})
        for project_id, run_id, path in events_files(root):
            key = run_key(project_id, run_id)
            if key not in self.cursors and not from_start:
                found = end_cursor(path)
                if found is not None:
                    self.cursors[key] = found

    def read(self, paths: Iterable[Path] | None = None,
             budget: int = 4 * _CHUNK) -> tuple[list[LiveEvent], bool]:
        """The events appended since the last read to `paths` (every events file when None):
        (events in file order, True if more may be waiting beyond `budget` bytes). Lines
        that are not events are passed over (the index records them)."""
        found: list[LiveEvent] = []
        targets: list[tuple[str, str, Path]]
        if paths is None:
            targets = list(events_files(self.root))
        else:
            targets = [(*pair, path) for path in paths
                       if (pair := key_of(self.root, path)) is not None]
        more = False
        for project_id, run_id, path in targets:
            if budget <= 0:
                more = True
                break
            key = run_key(project_id, run_id)
            before = self.cursors.get(key)
            if before is not None and _unchanged(path, before):
                continue  # (the safety tick looks at every file: most have nothing new)
            lines, cursor = read_appended(path, before, budget)
            if cursor is None:
                continue
            self.cursors[key] = cursor
            used = cursor.offset - (before.offset if before and before.ino == cursor.ino else 0)
            if used >= budget:  # stopped at the budget: this file may hold more
                more = True
            budget -= max(used, 1)
            for start, line in lines:
                if not line.strip():
                    continue
                event, _error = parse_line(line.decode("utf-8", "replace"))
                if event is not None:
                    found.append(LiveEvent(key, project_id, run_id, start,
                                           line_end(start, line), cursor.ino, event))
        return found, more


def _unchanged(path: Path, cursor: FileCursor) -> bool:
    """The file ends where the cursor is (same inode): nothing to read, no need to open it."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_ino == cursor.ino and st.st_size == cursor.offset


def ack_file(root: Path, subscription_id: str) -> Path:
    """Where a subscription's acknowledged positions are kept: the id itself when it is a
    safe file name, else a digest of it."""
    name = subscription_id if _SAFE_NAME.fullmatch(subscription_id) and \
        subscription_id not in (".", "..") else \
        "h_" + hashlib.sha256(subscription_id.encode("utf-8", "surrogatepass")).hexdigest()
    return root / ACKS_DIR / f"{name}.json"


def load_acks(root: Path, subscription_id: str) -> dict[str, FileCursor] | None:
    """The positions acknowledged last time, or None if there are none (or unreadable)."""
    try:
        data = orjson.loads(ack_file(root, subscription_id).read_bytes())
        return {key: FileCursor(int(pos["offset"]), int(pos["ino"]))
                for key, pos in data["positions"].items()}
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None


def save_acks(root: Path, subscription_id: str, positions: dict[str, FileCursor]) -> None:
    path = ack_file(root, subscription_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, orjson.dumps({
        "subscription_id": subscription_id, "updated_at": now_iso(),
        "positions": {key: {"offset": c.offset, "ino": c.ino}
                      for key, c in sorted(positions.items())},
    }, option=orjson.OPT_INDENT_2), durable=False)
