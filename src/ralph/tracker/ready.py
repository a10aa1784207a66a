"""The rule that picks the next task, over any sequence of tasks."""

from __future__ import annotations

from collections.abc import Sequence

from ralph.tracker.model import Task


def _sort_key(task: Task) -> tuple[bool, bool, int, int]:
    # An in_progress task was interrupted (a killed run, a reopened attempt): finishing it comes
    # before starting anything else. Then priority, where a missing one sorts last, then order.
    return (
        task.status != "in_progress",
        task.priority is None,
        task.priority if task.priority is not None else 0,
        task.order,
    )


def next_ready(tasks: Sequence[Task]) -> Task | None:
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
