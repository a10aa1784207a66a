"""Checks that span tasks, shared by every format: dependencies must exist and not loop."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ralph.tracker.errors import TrackerError
from ralph.tracker.model import Task

# Where a task lives in its file, as a message prefix: "PRD.md:7" or "prd.json: story 'US-1'".
Locate = Callable[[Task], str]


def check_dependencies(tasks: Sequence[Task], locate: Locate) -> None:
    """Raise TrackerError for a dependency on an unknown id, then for the first cycle.

    A cycle would leave its tasks waiting on each other forever, so the loop would stop with
    "no progress" for a reason the user could not see; naming the cycle says what to edit.
    """
    by_id = {task.id: task for task in tasks}
    for task in tasks:
        for dep in task.depends_on:
            if dep not in by_id:
                raise TrackerError(
                    f"{locate(task)}: task '{task.id}' depends on unknown task '{dep}'"
                )
    cycle = find_cycle(tasks, by_id)
    if cycle:
        raise TrackerError(f"{locate(by_id[cycle[0]])}: dependency cycle: {' -> '.join(cycle)}")


def find_cycle(tasks: Sequence[Task], by_id: dict[str, Task]) -> list[str] | None:
    """The first cycle met by a depth-first walk in file order, as ids ending where they began.

    Iterative, so a long chain of dependencies cannot exhaust Python's recursion limit.
    """
    finished: set[str] = set()
    for root in tasks:
        if root.id in finished:
            continue
        path = [root.id]
        on_path = {root.id}
        pending: list[Iterator[str]] = [iter(root.depends_on)]
        while pending:
            dep = next(pending[-1], None)
            if dep is None:
                done = path.pop()
                on_path.discard(done)
                finished.add(done)
                pending.pop()
            elif dep in on_path:
                return [*path[path.index(dep) :], dep]
            elif dep not in finished:
                path.append(dep)
                on_path.add(dep)
                pending.append(iter(by_id[dep].depends_on))
    return None
