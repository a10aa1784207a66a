"""Choosing the next task, and the counts `ralph status` shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from ralph.tracker.model import Task
from ralph.tracker.ready import next_ready
from ralph.tracker.snapshot import Snapshot


class Summary(TypedDict):
    done: int
    total: int
    open: int
    in_progress: int
    blocked: list[tuple[str, str | None]]
    next: str | None


def next_task(tasks: Sequence[Task]) -> Task | None:
    """The task to work on now, or None when nothing is ready (see ralph.tracker.ready);
    a Snapshot answers without walking every task."""
    if isinstance(tasks, Snapshot):
        return tasks.next_task()
    return next_ready(tasks)


def summary(tasks: Sequence[Task]) -> Summary:
    """Counts by status, the blocked tasks with their reasons, and the next task's id."""
    chosen = next_task(tasks)
    return Summary(
        done=sum(task.status == "done" for task in tasks),
        total=len(tasks),
        open=sum(task.status == "open" for task in tasks),
        in_progress=sum(task.status == "in_progress" for task in tasks),
        blocked=[(task.id, task.blocked_reason) for task in tasks if task.status == "blocked"],
        next=chosen.id if chosen else None,
    )
