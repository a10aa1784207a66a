"""`ralph tasks`: the tasks as Ralph parsed them, and PRD lines it did not read as tasks.

The command's declaration; its work is in ralph.cli.tasks_view, which has no Typer in it so
that `ralph.cli.fastpath` can run a plain `ralph tasks` without importing Typer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def tasks(
    json: Annotated[bool, typer.Option("--json", help="Print the tasks and warnings as JSON "
                                                      "on stdout.")] = False,
    root: Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                              help="Project root.")] = None,
) -> None:
    """List the tasks as Ralph reads them from the PRD: id, status, kind, title,
    dependencies, attempts and blocked reasons. Lines that look like tasks but are not read
    as tasks are reported as warnings."""
    from ralph.cli.tasks_view import show_tasks

    show_tasks(json, root)
