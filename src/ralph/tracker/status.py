"""Checking the arguments of set_status, shared by every format."""

from __future__ import annotations

from pathlib import Path

from ralph.tracker.errors import TrackerError
from ralph.tracker.model import STATUSES, TaskStatus, is_status, one_line


def checked_status(path: Path, task_id: str, status: object) -> TaskStatus:
    """`status` as a TaskStatus; faces may pass any string, so it is checked at run time."""
    if not is_status(status):
        raise TrackerError(
            f"{path}: cannot set task '{task_id}' to unknown status {status!r}; "
            f"use one of {', '.join(STATUSES)}"
        )
    return status


def normalized_reason(reason: str | None) -> str | None:
    """A blocked reason on one line (it is stored as one line); an empty one counts as none."""
    if reason is None:
        return None
    return one_line(reason) or None
