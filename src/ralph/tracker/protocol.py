"""The interface every tracker format implements; the loop only ever sees this."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Protocol

from ralph.tracker.model import Task, TaskStatus

TrackerFormat = Literal["md", "json"]


class Tracker(Protocol):
    """A task list stored in one file that both people and agents edit.

    Nothing is cached: every call reads the file again, because the agent edits it between
    calls (ticking boxes) and the orchestrator must judge what is on disk now.
    """

    path: Path
    format: TrackerFormat

    def load(self) -> list[Task]:
        """Parse and validate the file; raises TrackerError."""
        ...

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        """Rewrite the file atomically, changing only that task's status (and blocked reason).

        `reason` is used only when `status` is "blocked"; None keeps any reason already
        recorded. Returns the task as read back from the new file; raises TrackerError for an
        unknown id or status.
        """
        ...
