"""The markdown tracker: a PRD.md whose `## Tasks` checklist is the task list."""

from __future__ import annotations

from pathlib import Path

from ralph.tracker.errors import TrackerError
from ralph.tracker.fileio import read_text, write_text
from ralph.tracker.mdedit import rewrite
from ralph.tracker.mdparse import parse_prd
from ralph.tracker.model import Task, TaskStatus
from ralph.tracker.protocol import TrackerFormat
from ralph.tracker.status import checked_status, normalized_reason


class MarkdownTracker:
    """Reads and updates a markdown PRD; see ralph.tracker.mdparse for the layout."""

    path: Path
    format: TrackerFormat

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = "md"

    def load(self) -> list[Task]:
        return [block.task for block in parse_prd(self.path, read_text(self.path)).blocks]

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        checked = checked_status(self.path, task_id, status)
        text = read_text(self.path)
        parsed = parse_prd(self.path, text)
        block = parsed.block(task_id)
        if block is None:
            raise TrackerError(f"{self.path}: no task with id '{task_id}'")
        new_text = rewrite(parsed, block, checked, normalized_reason(reason))
        if new_text != text:
            write_text(self.path, new_text)
        # Read back from the new text, so the caller sees exactly what the file now says.
        updated = parse_prd(self.path, new_text).block(task_id)
        assert updated is not None  # only a marker and a Blocked bullet changed
        return updated.task
