"""`ralph status`: the report and how the terminal shows it.

No Typer here: `ralph.cli.fastpath` runs a plain `ralph status` without importing it, and
loop_cmd holds the command's declaration."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ralph.cli.output import exit_text, terminal_safe, write_json
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.loop import StatusReport


def show_status(json: bool, root: Path | None) -> None:
    """The status of the project at `root` (default: the one here), as JSON or text."""
    from ralph.configcache import project_files
    from ralph.loop import project_status
    from ralph.loop.paths import ProjectPaths

    project = root or find_project_root()
    report = project_status(ProjectPaths(project), project_files(project))
    if json:
        write_json(report)
    else:
        print_status(report)


def print_status(report: StatusReport) -> None:
    from rich.console import Console
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
    state = "paused" if report.paused else "running" if report.running else "idle"
    run = f" ({report.activeRunId})" if report.activeRunId else ""
    out.print(f"[bold]{escape(report.prd)}[/bold]: {report.done}/{report.total} tasks done; "
              f"loop {state}{run}")
    if report.prd_error is not None:
        out.print(f"[red]the PRD cannot be read[/red]: {escape(terminal_safe(report.prd_error))}")
    elif report.next is not None:
        out.print(f"next: task {escape(report.next.task_id)}: {escape(report.next.title)} "
                  f"({report.next.kind})")
    elif report.done == report.total:
        out.print("next: nothing, every task is done")
    else:
        out.print("next: nothing ready (the remaining tasks are blocked or wait on them)")
    last = report.last
    if last is not None:
        verdict = "verified done" if last.verified else last.status.replace("_", " ")
        why = f": {escape(last.reason)}" if last.reason else ""
        when = (f"finished {last.finished_at}" if last.finished_at
                else f"started {last.started_at}")
        out.print(f"last: iteration {last.iteration_id}, task {escape(str(last.task_id))}, "
                  f"{verdict}{why} ({exit_text(last.exit_code)}, {when})")
    for blocked in report.blocked:
        out.print(f"[red]blocked[/red]: task {escape(blocked.task_id)}: "
                  f"{escape(blocked.title)}: {escape(blocked.reason or 'no reason given')}")
    spent = [(what, run.total) for what, run in (("last run", report.cost.last_run),
                                                 ("all runs", report.cost.all_runs))
             if run is not None and run.total.agent_runs]
    if spent:
        from ralph.cli.render import spend_text

        out.print("cost: " + "; ".join(
            f"{what} {spend_text(total.tokens_in, total.tokens_out, total.cost_usd)}"
            for what, total in spent))
