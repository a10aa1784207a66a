"""`ralph step`, `ralph run`, `ralph status`: thin faces over ralph.loop.LoopService.

The loop is imported inside each command: `ralph status` then loads only what a status
needs (config, tracker, state), not the agents, gates and git machinery."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ralph.cli.output import error_line, exit_text, write_json
from ralph.errors import RalphError
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.cli.display import RunDisplay
    from ralph.loop import LoopService, StatusReport

EXIT_DONE = 0
EXIT_INCOMPLETE = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C or SIGTERM, as ralph.cli.main reports an interrupt

T = TypeVar("T")

AgentOption = Annotated[str | None, typer.Option(
    "--agent", help="Agent from ralph.toml [agents.<name>] (default: loop.default_agent).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")]
CleanOption = Annotated[bool, typer.Option(
    "--require-clean", help="Refuse to start with uncommitted changes.")]


def _service(quiet: bool, max_iterations: int | None = None) -> tuple[LoopService, RunDisplay |
                                                                      None]:
    from ralph.cli.display import RunDisplay
    from ralph.loop import LoopService

    display = None if quiet else RunDisplay(max_iterations=max_iterations)
    return LoopService(find_project_root(), observer=display), display


def _drive(service: LoopService, work: Callable[[], Awaitable[T]]) -> T:
    """Run `work` with Ctrl-C and SIGTERM turned into a stop request (a second Ctrl-C
    interrupts at once)."""
    async def main() -> T:
        loop = asyncio.get_running_loop()

        def stop() -> None:
            service.stop()
            loop.remove_signal_handler(signal.SIGINT)

        loop.add_signal_handler(signal.SIGINT, stop)
        loop.add_signal_handler(signal.SIGTERM, service.stop)
        try:
            return await work()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:  # a step stopped by Ctrl-C or SIGTERM: interrupted (130)
        raise KeyboardInterrupt from None


def _with_service(quiet: bool, max_iterations: int | None,
                  work: Callable[[LoopService], Awaitable[T]]) -> T:
    """Open the loop service, run `work` on it (Ctrl-C = stop), close it; a RalphError
    becomes one `error:` line and exit code 2 (NothingToDo is left to the caller)."""
    from ralph.loop import NothingToDo

    try:
        service, display = _service(quiet, max_iterations)
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    try:
        return _drive(service, lambda: work(service))
    except NothingToDo:
        raise
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    finally:
        if display is not None:
            display.close()
        service.close()


def step(agent: AgentOption = None, json: JsonOption = False, quiet: QuietOption = False,
         require_clean: CleanOption = False) -> None:
    """Run exactly one iteration: a fresh agent on the next task, then the verdict.

    Exit code: 0 the task was verified done, 1 it was not, 2 an error."""
    from ralph.loop import NothingToDo

    try:
        result = _with_service(quiet, 1, lambda s: s.step(agent, require_clean=require_clean))
    except NothingToDo as exc:
        if json:
            write_json({"nothing_to_do": True, "complete": exc.complete, "message": str(exc)})
        else:
            Console(stderr=True).print(escape(str(exc)))
        raise typer.Exit(EXIT_DONE if exc.complete else EXIT_INCOMPLETE) from None
    if json:
        write_json(result.model_dump(mode="json"))
    raise typer.Exit(EXIT_DONE if result.verified else EXIT_INCOMPLETE)


def run(agent: AgentOption = None,
        max_iterations: Annotated[int | None, typer.Option(
            "--max-iterations", min=1, help="Stop after N iterations (default: "
                                            "loop.max_iterations).")] = None,
        json: JsonOption = False, quiet: QuietOption = False,
        require_clean: CleanOption = False) -> None:
    """Loop until every task is verified done (or no progress, the iteration limit, a stop).

    Exit code: 0 complete, 1 incomplete, 2 error, 130 stopped (Ctrl-C, SIGTERM)."""
    outcome = _with_service(quiet, max_iterations, lambda s: s.run(
        agent, max_iterations, require_clean=require_clean))
    if outcome.reason == "error":
        error_line(outcome.message)
    if json:
        write_json(outcome.model_dump(mode="json"))
    if outcome.reason == "complete":
        raise typer.Exit(EXIT_DONE)
    if outcome.reason == "stopped":
        raise typer.Exit(EXIT_INTERRUPTED)
    raise typer.Exit(EXIT_ERROR if outcome.reason == "error" else EXIT_INCOMPLETE)


def status(json: JsonOption = False,
           root: Annotated[Path | None, typer.Option("--root", help="Project root.")] = None
           ) -> None:
    """Show progress: done/total, the next task, whether a run is active, the last iteration
    and blocked tasks."""
    from ralph.config import load_config
    from ralph.loop import project_status
    from ralph.loop.paths import ProjectPaths

    project = root or find_project_root()
    report = project_status(ProjectPaths(project), load_config(project))
    if json:
        write_json(report.model_dump(mode="json"))
    else:
        print_status(report)


def print_status(report: StatusReport) -> None:
    out = Console(highlight=False, soft_wrap=True)
    state = "paused" if report.paused else "running" if report.running else "idle"
    run = f" ({report.activeRunId})" if report.activeRunId else ""
    out.print(f"[bold]{escape(report.prd)}[/bold]: {report.done}/{report.total} tasks done; "
              f"loop {state}{run}")
    if report.next is not None:
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
        out.print(f"last: iteration {last.iteration_id}, task {escape(str(last.task_id))}, "
                  f"{verdict}{why} ({exit_text(last.exit_code)}, finished {last.finished_at})")
    for blocked in report.blocked:
        out.print(f"[red]blocked[/red]: task {escape(blocked.task_id)}: "
                  f"{escape(blocked.title)}: {escape(blocked.reason or 'no reason given')}")
