"""`ralph step`, `ralph run`, `ralph status`: thin faces over ralph.loop.LoopService.

The loop, asyncio and Rich are imported inside each command, and the status's work is in
ralph.cli.status_view: `ralph status` loads only what a status needs (config, tracker,
state), not the agents, gates and git machinery."""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from ralph.cli.helpfmt import at_least
from ralph.cli.output import error_line, write_json
from ralph.cli.scale_cmd import (
    NamespaceOption,
    QueueOption,
    RunIdOption,
    TemporalOption,
    finish,
    run_on_temporal,
    status_of_run,
)
from ralph.errors import RalphError
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.cli.display import RunDisplay
    from ralph.loop import LoopService

EXIT_DONE = 0
EXIT_INCOMPLETE = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C or SIGTERM, as ralph.cli.main reports an interrupt
EXIT_HANGUP = 129  # stopped because the terminal went away (SIGHUP): 128 + 1, as shells say

T = TypeVar("T")

AgentOption = Annotated[str | None, typer.Option(
    "--agent", metavar="NAME",
    help="Agent from ralph.toml [agents.<name>] (default: loop.default_agent).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Show nothing while it runs.")]
VerboseOption = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Show tool results, reasoning and agent details too.")]
CleanOption = Annotated[bool, typer.Option(
    "--require-clean", help="Refuse to start with any uncommitted change, even to Ralph's "
                            "own project files (which are otherwise committed first).")]
DirtyOption = Annotated[bool, typer.Option(
    "--allow-dirty", help="Start even with changes Ralph did not make: they are committed "
                          "first, on their own.")]


class StopSignal:
    """Which signal stopped the command, if any (SIGHUP exits 129, the others 130)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_HANGUP if self.signal == signal.SIGHUP else EXIT_INTERRUPTED


def _service(quiet: bool, verbose: bool) -> tuple[LoopService, RunDisplay | None]:
    from ralph.cli.display import RunDisplay
    from ralph.loop import LoopService

    display = None if quiet else RunDisplay(verbose=verbose)
    return LoopService(find_project_root(), observer=display), display


def drive(service: LoopService, work: Callable[[], Awaitable[T]], stop: StopSignal, *,
           on_signal: Callable[[], None] | None = None) -> T:
    """Run `work` with Ctrl-C, SIGTERM and SIGHUP turned into a stop request (a second
    Ctrl-C interrupts at once); `on_signal` is called at the first. After SIGHUP the
    terminal is gone: output that would go to it goes nowhere instead of failing. Under
    `nohup` (SIGHUP ignored) a hangup stays ignored."""
    import asyncio

    terminal = [fd for fd in (1, 2) if os.isatty(fd)]  # after a hangup isatty() says no
    signals = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signals.append(signal.SIGHUP)

    async def main() -> T:
        loop = asyncio.get_running_loop()

        def stopping(signum: int) -> None:
            first = stop.signal is None
            stop.signal = stop.signal or signum
            if signum == signal.SIGHUP:
                _detach(terminal)
            elif first and on_signal is not None:
                on_signal()
            service.stop()
            if signum == signal.SIGINT:
                loop.remove_signal_handler(signal.SIGINT)

        for signum in signals:
            loop.add_signal_handler(signum, stopping, signum)
        try:
            return await work()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:  # a step stopped by a signal: interrupted
        raise typer.Exit(stop.exit_code) from None


def _detach(fds: list[int]) -> None:
    """Point `fds` (those that were the terminal) at /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _with_service(quiet: bool, verbose: bool,
                  work: Callable[[LoopService], Awaitable[T]],
                  stop: StopSignal) -> tuple[T, RunDisplay | None]:
    """Open the loop service, run `work` on it (Ctrl-C = stop), close it; the result and
    the display. A RalphError becomes one `error:` line (unless the display showed it) and
    exit code 2 (NothingToDo is left to the caller)."""
    from ralph.loop import NothingToDo

    try:
        service, display = _service(quiet, verbose)
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    try:
        return drive(service, lambda: work(service), stop), display
    except NothingToDo:
        raise
    except RalphError as exc:
        if display is None or not display.showed(str(exc)):
            error_line(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    finally:
        if display is not None:
            display.close()
        service.close()


def step(agent: AgentOption = None, json: JsonOption = False, quiet: QuietOption = False,
         verbose: VerboseOption = False, require_clean: CleanOption = False,
         allow_dirty: DirtyOption = False) -> None:
    """Run exactly one iteration: a fresh agent on the next task, then the verdict.

    Exit code: 0 the task was verified done, 1 it was not, 2 an error, 130 stopped (Ctrl-C,
    SIGTERM), 129 the terminal closed (SIGHUP)."""
    from rich.console import Console
    from rich.markup import escape

    from ralph.loop import NothingToDo

    stop = StopSignal()
    try:
        result, _ = _with_service(quiet, verbose, lambda s: s.step(
            agent, require_clean=require_clean, allow_dirty=allow_dirty), stop)
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
            "--max-iterations", metavar="N", callback=at_least(1),
            help="Stop after N iterations (default: loop.max_iterations).")] = None,
        json: JsonOption = False, quiet: QuietOption = False, verbose: VerboseOption = False,
        require_clean: CleanOption = False, allow_dirty: DirtyOption = False,
        on: Annotated[str, typer.Option(
            "--on", metavar="WHERE", help="local (here), or temporal: a workflow whose "
                                          "iterations run on `ralph worker`s.")] = "local",
        temporal: TemporalOption = None,
        repo: Annotated[str | None, typer.Option(
            "--repo", metavar="URL", show_default=False,
            help="With --on temporal: the git repository the workers check out (a URL, or "
                 "a path every worker reaches).")] = None,
        branch: Annotated[str | None, typer.Option(
            "--branch", metavar="B", show_default=False,
            help="With --on temporal: the run's branch (default: ralph/<run id>).")] = None,
        base: Annotated[str | None, typer.Option(
            "--base", metavar="B", show_default=False,
            help="With --on temporal: the branch a new run branch starts from (default: the "
                 "repository's default branch).")] = None,
        store: Annotated[str | None, typer.Option(
            "--store", metavar="PATH|URL", show_default=False,
            help="With --on temporal: the store the workers share, to follow the run's "
                 "events (default: $RALPH_STORE).")] = None,
        namespace: NamespaceOption = None, queue: QueueOption = None,
        detach: Annotated[bool, typer.Option(
            "--detach", help="With --on temporal: print the run id and return.")] = False,
        heartbeat: Annotated[float | None, typer.Option(
            "--heartbeat-seconds", metavar="S", show_default=False,
            help="With --on temporal: how long a worker may go silent before its iteration "
                 "is retried on another (default: 30).")] = None,
        ) -> None:
    """Loop until every task is verified done (or no progress, the iteration limit, a budget,
    a stop), then show a summary: tasks, iterations, duration, tokens and cost per agent.
    With --on temporal, the loop is a Temporal workflow whose iterations run on workers.

    Exit code: 0 complete, 1 incomplete (no progress, the iteration limit, a budget), 2
    error, 130 stopped (Ctrl-C, SIGTERM, `ralph stop`), 129 the terminal closed (SIGHUP)."""
    from ralph.cli.render import summary_table

    if on not in ("local", "temporal"):
        error_line(f"--on must be local or temporal, not {on!r}")
        raise typer.Exit(EXIT_ERROR)
    remote_only = {"--temporal": temporal, "--repo": repo, "--branch": branch, "--base": base,
                   "--store": store, "--namespace": namespace, "--queue": queue,
                   "--detach": detach or None, "--heartbeat-seconds": heartbeat}
    if on == "local":
        given = [name for name, value in remote_only.items() if value is not None]
        if given:
            error_line(f"{given[0]} needs --on temporal")
            raise typer.Exit(EXIT_ERROR)
    else:
        if require_clean or allow_dirty or quiet:
            error_line("--require-clean, --allow-dirty and --quiet are for local runs")
            raise typer.Exit(EXIT_ERROR)
        finish(lambda: run_on_temporal(
            temporal=temporal, namespace=namespace, queue=queue, repo=repo, branch=branch,
            base=base, agent=agent, max_iterations=max_iterations, store=store, detach=detach,
            json=json, verbose=verbose, heartbeat=heartbeat))

    stop = StopSignal()
    outcome, display = _with_service(quiet, verbose, lambda s: s.run(
        agent, max_iterations, require_clean=require_clean, allow_dirty=allow_dirty), stop)
    if outcome.reason == "error" and (display is None or not display.showed(outcome.message)):
        error_line(outcome.message)
    if display is not None:
        display.console.print(summary_table(outcome.model_dump(mode="json"),
                                            with_message=not display.showed(outcome.message)))
    if json:
        write_json(outcome.model_dump(mode="json"))
    if outcome.reason == "complete":
        raise typer.Exit(EXIT_DONE)
    if outcome.reason == "stopped":
        raise typer.Exit(stop.exit_code)
    raise typer.Exit(EXIT_ERROR if outcome.reason == "error" else EXIT_INCOMPLETE)


def status(json: JsonOption = False,
           root: Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                                     help="Project root.")] = None,
           run: RunIdOption = None, temporal: TemporalOption = None,
           namespace: NamespaceOption = None) -> None:
    """Show progress: done/total, the next task, whether a run is active, the last iteration
    and blocked tasks. With --run, a run on Temporal, from any machine."""
    if run is None and (temporal is not None or namespace is not None):
        error_line("--temporal and --namespace need --run ID")
        raise typer.Exit(EXIT_ERROR)
    if run is not None:
        finish(lambda: status_of_run(run, temporal=temporal, namespace=namespace, json=json))
    from ralph.cli.status_view import show_status

    show_status(json, root)
