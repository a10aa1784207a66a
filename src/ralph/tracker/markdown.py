"""The markdown tracker: a PRD.md whose `## Tasks` checklist is the task list."""

from __future__ import annotations

from pathlib import Path

from ralph.tracker.errors import TrackerError
from ralph.tracker.filecache import FileCache
from ralph.tracker.fileio import write_text
from ralph.tracker.mdedit import rewrite
from ralph.tracker.mdincremental import reparse_prd
from ralph.tracker.mdparse import ParsedPrd, parse_prd
from ralph.tracker.model import Task, TaskStatus
from ralph.tracker.protocol import TrackerFormat
from ralph.tracker.snapshot import Snapshot
from ralph.tracker.status import checked_status, normalized_reason


class MarkdownTracker:
    """Reads and updates a markdown PRD; see ralph.tracker.mdparse for the layout.

    The last parse is kept: a file whose signature shows no change is not read again, and a
    changed one is parsed only where it changed (ralph.tracker.mdincremental).
    """

    path: Path
    format: TrackerFormat

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = "md"
        self.file = FileCache(path)
        self.parses = 0  # full and partial parses done (tests count them, not time)
        self._parsed: ParsedPrd | None = None
        self._failed: TrackerError | None = None  # why the cached version cannot be parsed

    def snapshot(self) -> Snapshot:
        return self._current().snapshot

    def load(self) -> list[Task]:
        return list(self.snapshot())

    def text(self) -> str:
        return self.file.text()

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        checked = checked_status(self.path, task_id, status)
        parsed = self._current()
        block = parsed.block(task_id)
        if block is None:
            raise TrackerError(f"{self.path}: no task with id '{task_id}'")
        new_text = rewrite(parsed, block, checked, normalized_reason(reason))
        if new_text == _text(parsed):
            return block.task
        updated = self._parse(new_text)  # before writing: the file is never left unparsable
        write_text(self.path, new_text)
        self.file.remember(new_text)
        self._parsed = updated
        # Read back from the new text, so the caller sees exactly what the file now says.
        task = updated.snapshot.get(task_id)
        assert task is not None  # only a marker and a Blocked bullet changed
        return task

    def _current(self) -> ParsedPrd:
        version, changed = self.file.current()
        if not changed and self._failed is not None:
            raise self._failed  # the same broken file: the same error, without parsing again
        if changed or self._parsed is None:
            try:
                self._parsed = self._parse(version.text)
                self._failed = None
            except TrackerError as exc:
                # Parsed whole once fixed: a partial parse needs a good version to start from.
                self._parsed, self._failed = None, exc
                raise
        return self._parsed

    def _parse(self, text: str) -> ParsedPrd:
        self.parses += 1
        if self._parsed is None:
            return parse_prd(self.path, text)
        return reparse_prd(self.path, self._parsed, text)


def _text(parsed: ParsedPrd) -> str:
    return ("\ufeff" if parsed.bom else "") + parsed.body
