"""A session's files checked for a state the orchestrator can work from.

Run on `resume` and before every step: a session directory edited by hand (or by an agent)
into an invalid state stops the workflow with one line naming the file, the line and the
problem, before anything is overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ralph.workflow.errors import WorkflowError
from ralph.workflow.progress import ProgressFile, parse_progress
from ralph.workflow.session_dir import SessionDir
from ralph.workflow.tasks_file import TasksFile, parse_tasks


@dataclass(frozen=True)
class SessionFiles:
    """The parsed tasks.md and progress.md of a session (None for a file not yet written)."""

    tasks: TasksFile | None
    progress: ProgressFile | None


def read_text(path: Path, source: str) -> str | None:
    """A session file's text, None if it does not exist; WorkflowError if it cannot be read
    or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise WorkflowError(f"{source}: not UTF-8 text") from None
    except OSError as exc:
        raise WorkflowError(f"{source}: cannot read: {exc.strerror or exc}") from None


def validate_session(session: SessionDir) -> SessionFiles:
    """tasks.md and progress.md parsed and checked against each other; WorkflowError
    `<file>:<line>: <problem>` for the first of: an unknown marker, a task id listed twice
    (in either file), a task in progress.md missing from tasks.md, a task of tasks.md with no
    line in progress.md (once progress.md exists), a dependency on an
    unknown task, a task depending on itself or a dependency cycle. Missing files are not
    an error (a new session has none yet)."""
    tasks_source = session.relative(session.tasks)
    progress_source = session.relative(session.progress)
    tasks_text = read_text(session.tasks, tasks_source)
    progress_text = read_text(session.progress, progress_source)
    tasks = None if tasks_text is None else parse_tasks(tasks_text, tasks_source)
    progress = None if progress_text is None else parse_progress(progress_text, progress_source)
    if tasks is not None:
        check_dependencies(tasks, tasks_source)
    if progress is not None:
        known = set(tasks.ids) if tasks is not None else set()
        for entry in progress.entries:
            if entry.task_id not in known:
                raise WorkflowError(f"{progress_source}:{entry.line}: {entry.task_id} is not "
                                    f"in {session.tasks.name}")
        if tasks is not None:
            listed = {entry.task_id for entry in progress.entries}
            for task in tasks.tasks:
                if task.task_id not in listed:
                    raise WorkflowError(f"{progress_source}: no line for {task.task_id} "
                                        f"({tasks_source}:{task.line})")
    return SessionFiles(tasks, progress)


def check_dependencies(tasks: TasksFile, source: str = "tasks.md") -> None:
    """WorkflowError for a dependency on an unknown task, on itself, or a cycle."""
    known = set(tasks.ids)
    for task in tasks.tasks:
        for dependency in task.dependencies:
            if dependency == task.task_id:
                raise WorkflowError(f"{source}:{task.dependencies_line}: {task.task_id} "
                                    "depends on itself")
            if dependency not in known:
                raise WorkflowError(f"{source}:{task.dependencies_line}: {task.task_id} "
                                    f"depends on unknown task {dependency}")
    cycle = _find_cycle(tasks)
    if cycle is not None:
        first = tasks.get(cycle[0])
        line = first.dependencies_line if first is not None else 0
        raise WorkflowError(f"{source}:{line}: dependency cycle {' -> '.join(cycle)}")


def _find_cycle(tasks: TasksFile) -> list[str] | None:
    """A dependency cycle as ids (first id repeated at the end), or None."""
    graph = {task.task_id: task.dependencies for task in tasks.tasks}
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            node, index = stack.pop()
            if index == 0:
                path.append(node)
                on_path.add(node)
            edges = graph.get(node, ())
            if index < len(edges):
                stack.append((node, index + 1))
                nxt = edges[index]
                if nxt in on_path:
                    return [*path[path.index(nxt):], nxt]
                if nxt not in done:
                    stack.append((nxt, 0))
            else:
                path.pop()
                on_path.discard(node)
                done.add(node)
    return None
