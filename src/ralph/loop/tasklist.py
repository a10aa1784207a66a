"""The tasks as the loop sees them (`ralph tasks`): the tracker's tasks with the attempts and
blocks state.json keeps, and the PRD lines that look like tasks but are not read as tasks.

Reads the tracker and state.json only and writes nothing, like the status report."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ralph.configcache import ProjectFiles
from ralph.loop.paths import ProjectPaths
from ralph.loop.state import load_state
from ralph.loop.status import state_block
from ralph.tracker import (
    SuspiciousLine,
    TaskKind,
    TaskStatus,
    TrackerError,
    next_task,
    open_tracker,
    suspicious_lines,
)


@dataclass
class TaskEntry:
    """One task: what the tracker says, and what the loop has done with it."""

    id: str
    title: str
    status: TaskStatus
    kind: TaskKind
    depends_on: list[str]
    acceptance: list[str]
    attempts: int  # attempts started (state.json), 0 when none was
    blocked_reason: str | None  # when blocked: the tracker's reason, else state.json's
    next: bool  # the task the next iteration works on


@dataclass
class PrdWarning:
    """A PRD line that looks like a task but is not read as one."""

    line: int  # 1-based
    text: str  # the line as written
    reason: str  # why it is not a task, and how to write it

    @classmethod
    def of(cls, found: SuspiciousLine) -> PrdWarning:
        return cls(line=found.line, text=found.text, reason=found.reason)

    def describe(self, source: str) -> str:
        return SuspiciousLine(self.line, self.text, self.reason).describe(source)


@dataclass
class TaskList:
    prd: str  # the tracker file, as ralph.toml names it
    tasks: list[TaskEntry]
    warnings: list[PrdWarning]


class TasksUnreadable(TrackerError):
    """The tracker cannot be read or understood; `warnings` may say why (a task list written
    as a numbered list, say, reads as no tasks at all)."""

    def __init__(self, message: str, warnings: list[PrdWarning]) -> None:
        super().__init__(message)
        self.warnings = warnings


def task_list(paths: ProjectPaths, files: ProjectFiles) -> TaskList:
    """The project's tasks in file order; raises TasksUnreadable when the tracker fails.
    `files`: ralph.toml's `[files]` (a Config's `files`, or ralph.configcache's)."""
    source = files.prd
    prd = paths.root / source
    try:
        warnings = [PrdWarning.of(found) for found in suspicious_lines(prd)]
    except TrackerError:
        warnings = []  # the tracker's own load says what is wrong with the file
    try:
        tasks = open_tracker(prd).load()
    except TrackerError as exc:
        raise TasksUnreadable(str(exc), warnings) from None
    state = load_state(paths.state, repair=False)
    chosen = next_task(tasks)
    entries = []
    for task in tasks:
        recorded = state.tasks.get(task.id)
        blocked = task.status == "blocked"
        entries.append(TaskEntry(
            id=task.id, title=task.title, status=task.status, kind=task.kind,
            depends_on=list(task.depends_on), acceptance=list(task.acceptance),
            attempts=recorded.attempts if recorded else recorded_attempts(paths, task.id),
            blocked_reason=(task.blocked_reason or state_block(state, task)) if blocked else None,
            next=chosen is not None and task.id == chosen.id))
    return TaskList(prd=source, tasks=entries, warnings=warnings)


def recorded_attempts(paths: ProjectPaths, task_id: str) -> int:
    """The attempts recorded for a task state.json no longer follows (a task verified done
    leaves it): one record per attempt in .ralph/attempts/TASK/."""
    try:
        return sum(1 for entry in os.scandir(paths.attempts_dir(task_id))
                   if entry.name.endswith(".json"))
    except OSError:
        return 0
