"""`ralph tasks`: the tasks and the PRD's warnings, as a table or JSON.

No Typer here (ralph.cli.fastpath runs a plain `ralph tasks` without it; tasks_cmd holds the
command's declaration), and Rich is imported only when a table is drawn."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ralph.cli.output import terminal_safe, write_json
from ralph.project import find_project_root

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from ralph.loop.tasklist import PrdWarning, TaskEntry, TaskList

STATUS_STYLE = {"open": "", "in_progress": "yellow", "done": "green", "blocked": "red"}


def show_tasks(json: bool, root: Path | None) -> None:
    """The tasks of the project at `root` (default: the one here), as JSON or a table."""
    from ralph.config import load_config
    from ralph.loop.paths import ProjectPaths
    from ralph.loop.tasklist import TasksUnreadable, task_list

    project = root or find_project_root()
    config = load_config(project)
    try:
        listed = task_list(ProjectPaths(project), config)
    except TasksUnreadable as exc:
        print_warnings(config.files.prd, exc.warnings)
        raise
    if json:
        write_json(listed.model_dump(mode="json"))
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


def print_tasks(listed: TaskList, console: Console | None = None) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    out = console or Console(highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("id", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("title", ratio=1)
    table.add_column("depends on")
    table.add_column("attempts", justify="right", no_wrap=True)
    for task in listed.tasks:
        table.add_row(_safe(task.id), _status(task), task.kind, _title(task),
                      _safe(", ".join(task.depends_on)), str(task.attempts))
    out.print(table)
    out.print(_summary(listed), soft_wrap=True)


def _safe(text: str) -> Text:
    from rich.text import Text

    return Text(terminal_safe(text))


def _status(task: TaskEntry) -> Text:
    from rich.text import Text

    text = Text(task.status.replace("_", " "), style=STATUS_STYLE[task.status])
    if task.next:
        text.append(" (next)", style="bold")
    return text


def _title(task: TaskEntry) -> Text:
    title = _safe(task.title)
    if task.status == "blocked":
        title.append(f"\nblocked: {terminal_safe(task.blocked_reason or 'no reason given')}",
                     style="red")
    return title


def _summary(listed: TaskList) -> Text:
    done = sum(task.status == "done" for task in listed.tasks)
    total = len(listed.tasks)
    chosen = next((task for task in listed.tasks if task.next), None)
    if chosen is not None:
        nxt = f"next: task {chosen.id}"
    elif done == total:
        nxt = "every task is done"
    else:
        nxt = "nothing ready (the remaining tasks are blocked or wait on them)"
    return _safe(f"{listed.prd}: {done}/{total} tasks done; {nxt}")
