"""The tasks of one version of a tracker file, with the questions the loop asks of them
every iteration answered without walking every task in Python.

A 10,000-task PRD must cost an iteration no more than a 50-task one: the statuses are kept as
one string (a character per task), so "how many are done", "which is next" and "what was
ticked since" are string searches, and the position of an id is a dict lookup.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import overload

from ralph.tracker.model import Task, TaskStatus
from ralph.tracker.ready import next_ready
from ralph.tracker.textdiff import common_affixes

# One character per status in `Snapshot.marks`.
MARK: dict[TaskStatus, str] = {"open": " ", "done": "x", "in_progress": "~", "blocked": "-"}


def marks_of(tasks: Sequence[Task]) -> str:
    return "".join([MARK[task.status] for task in tasks])


class Snapshot(Sequence[Task]):
    """An immutable, ordered list of tasks (file order) with fast status queries.

    `positions` maps each id to its position; versions of a file whose ids did not change share
    one mapping (so it is never to be mutated).
    """

    __slots__ = ("_tasks", "marks", "positions", "ranked")

    def __init__(self, tasks: tuple[Task, ...], *, marks: str | None = None,
                 index: Mapping[str, int] | None = None, ranked: bool | None = None) -> None:
        self._tasks = tasks
        self.marks = marks if marks is not None else marks_of(tasks)
        self.positions: Mapping[str, int] = (index if index is not None
                                         else {task.id: n for n, task in enumerate(tasks)})
        # Whether any task has a priority (prd.json): then "next" needs the general rule.
        self.ranked = (ranked if ranked is not None
                       else any(task.priority is not None for task in tasks))

    # -- the sequence ------------------------------------------------------------------------

    @property
    def tasks(self) -> tuple[Task, ...]:
        return self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    @overload
    def __getitem__(self, item: int) -> Task: ...

    @overload
    def __getitem__(self, item: slice) -> Sequence[Task]: ...

    def __getitem__(self, item: int | slice) -> Task | Sequence[Task]:
        return self._tasks[item]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks)

    # -- questions -----------------------------------------------------------------------------

    def get(self, task_id: str) -> Task | None:
        position = self.positions.get(task_id)
        return None if position is None else self._tasks[position]

    def count_of(self, status: TaskStatus) -> int:
        return self.marks.count(MARK[status])

    @property
    def done(self) -> int:
        return self.marks.count("x")

    def all_done(self) -> bool:
        return " " not in self.marks and "~" not in self.marks and "-" not in self.marks

    def blocked(self) -> list[Task]:
        """The blocked tasks, in file order."""
        found, position = [], self.marks.find("-")
        while position >= 0:
            found.append(self._tasks[position])
            position = self.marks.find("-", position + 1)
        return found

    def is_done(self, task_id: str) -> bool:
        position = self.positions.get(task_id)
        return position is not None and self.marks[position] == "x"

    def next_task(self) -> Task | None:
        """The task to work on now (see ralph.tracker.selection.next_task): an interrupted
        (in_progress) ready task first, then the first ready open one, in file order."""
        if self.ranked:
            return next_ready(self._tasks)
        for mark in ("~", " "):
            position = self.marks.find(mark)
            while position >= 0:
                task = self._tasks[position]
                if all(self.is_done(dep) for dep in task.depends_on):
                    return task
                position = self.marks.find(mark, position + 1)
        return None

    def done_since(self, before: Snapshot, known: AbstractSet[str] = frozenset()) -> list[Task]:
        """Tasks done here that were not done in `before`, nor in `known`."""
        if before.positions is self.positions:  # the same ids in the same places: by marks
            start, end = common_affixes(before.marks, self.marks)
            changed = range(start, len(self.marks) - end)
        else:
            return [task for task in self._tasks if task.status == "done"
                    and not before.is_done(task.id) and task.id not in known]
        return [self._tasks[n] for n in changed
                if self.marks[n] == "x" and before.marks[n] != "x"
                and self._tasks[n].id not in known]
