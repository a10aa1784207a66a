"""`ralph tasks`: the tasks and the PRD's warnings, as a table or JSON.

No Typer here (ralph.cli.fastpath runs a plain `ralph tasks` without it; tasks_cmd holds the
command's declaration), and no Rich console but for warnings: the table is plain text
(ralph.cli.texttable)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.cli.output import terminal_safe, write_json
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.loop.tasklist import PrdWarning, TaskEntry, TaskList

STATUS_STYLE = {"open": "", "in_progress": "yellow", "done": "green", "blocked": "red"}


def show_tasks(json: bool, root: Path | None) -> None:
    """The tasks of the project at `root` (default: the one here), as JSON or a table."""
    from ralph.configcache import project_files
    from ralph.loop.paths import ProjectPaths
    from ralph.loop.tasklist import TasksUnreadable, task_list

    project = root or find_project_root()
    files = project_files(project)
    try:
        listed = task_list(ProjectPaths(project), files)
    except TasksUnreadable as exc:
        print_warnings(files.prd, exc.warnings)
        raise
    if json:
        write_json(listed)
        return
    print_warnings(listed.prd, listed.warnings)
    print_tasks(listed)


def print_warnings(source: str, warnings: list[PrdWarning]) -> None:
    if not warnings:
        return
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in warnings:
        err.print(f"[yellow]warning[/yellow]: {escape(terminal_safe(warning.describe(source)))}")


def print_tasks(listed: TaskList) -> None:
    from ralph.cli.texttable import Cell, Column, print_table

    columns = [Column("id"), Column("status"), Column("kind"), Column("title", wrap=True),
               Column("depends on", wrap=True), Column("attempts", right=True)]
    rows: list[list[Cell]] = [
        [[(terminal_safe(task.id), "")], _status(task), [(task.kind, "")], _title(task),
         [(terminal_safe(", ".join(task.depends_on)), "")], [(str(task.attempts), "")]]
        for task in listed.tasks]
    out = sys.stdout
    print_table(columns, rows, out)
    out.write(_summary(listed) + "\n")
    out.flush()


def _status(task: TaskEntry) -> list[tuple[str, str]]:
    spans = [(task.status.replace("_", " "), STATUS_STYLE[task.status])]
    if task.next:
        spans.append((" (next)", "bold"))
    return spans


def _title(task: TaskEntry) -> list[tuple[str, str]]:
    spans = [(terminal_safe(task.title), "")]
    if task.status == "blocked":
        reason = terminal_safe(task.blocked_reason or "no reason given")
        spans.append((f"\nblocked: {reason}", "red"))
    return spans


def _summary(listed: TaskList) -> str:
    done = sum(task.status == "done" for task in listed.tasks)
    total = len(listed.tasks)
    chosen = next((task for task in listed.tasks if task.next), None)
    if chosen is not None:
        nxt = f"next: task {chosen.id}"
    elif done == total:
        nxt = "every task is done"
    else:
        nxt = "nothing ready (the remaining tasks are blocked or wait on them)"
    return terminal_safe(f"{listed.prd}: {done}/{total} tasks done; {nxt}")
