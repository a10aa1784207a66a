"""The interface every tracker format implements; the loop only ever sees this."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from ralph.tracker.model import Task, TaskStatus
from ralph.tracker.snapshot import Snapshot

TrackerFormat = Literal["md", "json"]


class Tracker(Protocol):
    """A task list stored in one file that both people and agents edit.

    Every call answers for the file as it is on disk now (the agent edits it between calls),
    but a tracker keeps its last parse: a file whose signature (device, inode, size, mtime)
    is unchanged is not read again, unless it was written within the filesystem's timestamp
    granularity (then its content is compared), and a changed markdown file is parsed only
    where it changed. Keep one tracker per file to benefit.
    """

    path: Path
    format: TrackerFormat

    def snapshot(self) -> Snapshot:
        """The tasks as the file holds them now; raises TrackerError."""
        ...

    def load(self) -> list[Task]:
        """The tasks as a new list (see snapshot()); raises TrackerError."""
        ...

    def text(self) -> str:
        """The file's text as last read (by snapshot() or load()), else as it is now."""
        ...

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        """Rewrite the file atomically, changing only that task's status (and blocked reason).

        `reason` is used only when `status` is "blocked"; None keeps any reason already
        recorded. Returns the task as read back from the new file; raises TrackerError for an
        unknown id or status.
        """
        ...
