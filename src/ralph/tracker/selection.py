"""Choosing the next task, and the counts `ralph status` shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from ralph.tracker.model import Task


class Summary(TypedDict):
    done: int
    total: int
    open: int
    in_progress: int
    blocked: list[tuple[str, str | None]]
    next: str | None


def _sort_key(task: Task) -> tuple[bool, bool, int, int]:
    # An in_progress task was interrupted (a killed run, a reopened attempt): finishing it comes
    # before starting anything else. Then priority, where a missing one sorts last, then order.
    return (
        task.status != "in_progress",
        task.priority is None,
        task.priority if task.priority is not None else 0,
        task.order,
    )


def next_task(tasks: Sequence[Task]) -> Task | None:
    """The task to work on now, or None when nothing is ready.

    Ready means open or in_progress (never done or blocked) with every prerequisite done. An id
    in depends_on that names no task counts as not done (load() rejects such files anyway).
    """
    done = {task.id for task in tasks if task.status == "done"}
    ready = [
        task
        for task in tasks
        if task.status in ("open", "in_progress") and all(dep in done for dep in task.depends_on)
    ]
    return min(ready, key=_sort_key, default=None)


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
