"""`ralph workflow ...`: the role workflow (planner, questioner, executor, reviewer) and its
contracts."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import HelpCommand
from ralph.cli.output import argument_or_stdin, error_line, terminal_safe, write_json
from ralph.errors import RalphError
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.workflow.service import WorkflowOutcome, WorkflowService

STOP_WAIT_S = 30.0  # ralph.workflow.service.STOP_WAIT_S, without importing it for --help

# ralph.workflow.contracts.ROLES, written out: `ralph --help` lists this group without
# importing pydantic (a test keeps the two the same).
ROLES = ("planner", "executor", "reviewer", "questioner")
app = typer.Typer(help="Run requests through planner, executor, reviewer and questioner "
                       "agents under typed contracts.", no_args_is_help=True)

RoleChoice = StrEnum("RoleChoice", {role: role for role in ROLES})  # type: ignore[misc]


@app.command(cls=HelpCommand)
def schema(
    role: Annotated[RoleChoice, typer.Argument(
        metavar="ROLE", help=f"The role: {', '.join(ROLES)}.", case_sensitive=True,
        show_choices=False)],
    input_: Annotated[bool, typer.Option("--input", help="The role's input schema.")] = False,
    output: Annotated[bool, typer.Option(
        "--output", help="The role's output schema (the default).")] = False,
) -> None:
    """Print the JSON Schema of a role's output (or, with --input, of its input)."""
    if input_ and output:
        raise typer.BadParameter("cannot be used with --output", param_hint="--input")
    from ralph.workflow.contracts import schema_text

    sys.stdout.write(schema_text(role.value, "input" if input_ else "output") + "\n")


# -- running sessions ------------------------------------------------------------------------

RootOption = Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                                 help="Project root.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q",
                                           help="Show nothing while the roles work.")]
SessionArg = Annotated[str, typer.Argument(metavar="SESSION_ID",
                                           help="The session (YYMMDD-HHMMSS).")]
OptionalSessionArg = Annotated[str | None, typer.Argument(
    metavar="SESSION_ID", help="The session (YYMMDD-HHMMSS); default: the newest.",
    show_default=False)]

# How `start`, `resume` and `answer` exit, by the state the session ended in.
EXIT_CODES = {"COMPLETE": 0, "FAILED": 1, "BLOCKED": 3}
EXIT_ERROR = 2
EXIT_NO_SESSION = 1
EXIT_STOPPED = 130


@contextlib.contextmanager
def _service(root: Path | None, *, running: bool = False, quiet: bool = True
             ) -> Iterator[WorkflowService]:
    """The project's workflow service (ralph.toml read only to run a session: reading and
    stopping work with a broken one); a RalphError becomes one line and exit 2."""
    from ralph.config import load_config
    from ralph.store import Store
    from ralph.workflow.service import WorkflowService

    try:
        project = (root or find_project_root()).resolve()
        if not (project / ".ralph").is_dir():
            raise RalphError(f"no Ralph project at {project} (no .ralph/ here or above): run "
                             "`ralph init`, or pass --root")
        config = load_config(project) if running else None
        with Store(project / ".ralph" / "store", create=running) as store:
            observer = None
            if running and not quiet:
                from ralph.cli.workflow_view import WorkflowView

                observer = WorkflowView()
            yield WorkflowService(project, config, store, observer=observer)
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_ERROR) from None


def _drive(service: WorkflowService, work: Callable[[], Awaitable[WorkflowOutcome]]) -> None:
    """Run `work` with Ctrl-C and SIGTERM turned into a recorded stop (a second Ctrl-C
    interrupts at once); print how it ended and exit with its code."""
    import asyncio

    async def main() -> WorkflowOutcome:
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()

        def on_signal(signum: int) -> None:
            if not service.request_stop("ctrl-c" if signum == signal.SIGINT else "sigterm") \
                    and me is not None:
                me.cancel()  # before the session runs (or after): nothing to record
            if signum == signal.SIGINT:
                loop.remove_signal_handler(signal.SIGINT)

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            return await work()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    try:
        outcome = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(EXIT_STOPPED) from None
    sid = outcome.session_id
    if outcome.stopped_by is not None:
        sys.stdout.write(f"{sid} stopped ({outcome.stopped_by}) in {outcome.state.value}: "
                         f"`ralph workflow resume {sid}` goes on\n")
        raise typer.Exit(EXIT_STOPPED)
    sys.stdout.write(f"{sid} {outcome.state.value}: {terminal_safe(outcome.reason)}\n")
    if outcome.state.value == "BLOCKED":
        for blocker in outcome.blockers:
            sys.stdout.write(f"  - {terminal_safe(blocker)}\n")
        sys.stdout.write(f"answer with: ralph workflow answer {sid} \"...\"\n")
    elif outcome.state.value == "FAILED":
        sys.stdout.write(f"`ralph workflow status {sid}` shows why; "
                         f"`ralph workflow resume {sid}` runs the failed step again where "
                         "it can\n")
    raise typer.Exit(EXIT_CODES.get(outcome.state.value, 1))


@app.command(cls=HelpCommand)
def start(
    request: Annotated[str, typer.Argument(metavar="USER_REQUEST",
                                           help="What the workflow should do; - reads stdin.")],
    agent: Annotated[str | None, typer.Option(
        "--agent", metavar="NAME",
        help="The agent for every role ralph.toml's [workflow.roles] gives none "
             "(default: loop.default_agent).")] = None,
    allow_dirty: Annotated[bool, typer.Option(
        "--allow-dirty", help="Start even with changes Ralph did not make: they are "
                              "committed first, on their own.")] = False,
    quiet: QuietOption = False,
    root: RootOption = None,
) -> None:
    """Create a session for USER_REQUEST in .ralph-sessions/ and run it: the planner plans,
    Q&A cycles when it asks, then each task is executed, gated and reviewed until the
    completion check passes. Each step is shown on stderr; Ctrl-C stops (resume goes on).

    Exit code: 0 complete, 1 failed (or no such session), 2 bad input, 3 blocked (answer it
    with `ralph workflow answer`), 130 stopped (Ctrl-C, SIGTERM, `ralph workflow stop`)."""
    text = argument_or_stdin(request, "the request")
    with _service(root, running=True, quiet=quiet) as service:
        _run(service, lambda: service.start(text, agent, allow_dirty=allow_dirty))


@app.command(cls=HelpCommand)
def resume(session_id: OptionalSessionArg = None, quiet: QuietOption = False,
           root: RootOption = None) -> None:
    """Go on with a stopped or interrupted session (default: the newest one); a role call
    that was running is run again, nothing finished is done twice. A failed session runs its
    failed step again. Exit codes as `ralph workflow start`."""
    with _service(root, running=True, quiet=quiet) as service:
        _run(service, lambda: service.resume(session_id))


@app.command(cls=HelpCommand)
def answer(session_id: SessionArg,
           text: Annotated[str, typer.Argument(metavar="TEXT",
                                               help="The answer; - reads stdin.")],
           quiet: QuietOption = False, root: RootOption = None) -> None:
    """Answer a BLOCKED session's questions and go on: the planner gets the answer as
    CONTEXT. Exit codes as `ralph workflow start`."""
    reply = argument_or_stdin(text, "the answer")
    with _service(root, running=True, quiet=quiet) as service:
        _run(service, lambda: service.answer(session_id, reply))


@app.command(cls=HelpCommand)
def stop(session_id: OptionalSessionArg = None, root: RootOption = None) -> None:
    """Stop a running session from any terminal (default: the one running now); it records
    the stop, and `ralph workflow resume` goes on."""
    import asyncio

    with _service(root) as service:
        with _errors():
            status = asyncio.run(service.stop(session_id))
        sys.stdout.write(f"{status.session_id} {status.status} ({status.state})\n")
        if status.status == "running":
            error_line(f"session {status.session_id} did not stop within "
                       f"{int(STOP_WAIT_S)} s")
            raise typer.Exit(1)


@app.command(cls=HelpCommand)
def status(session_id: OptionalSessionArg = None,
           json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False,
           root: RootOption = None) -> None:
    """A session's state, tasks with markers and attempts, Q&A cycles, last role call and
    violations (default: the newest session)."""
    with _service(root) as service:
        with _errors():
            found = service.status(session_id)
        if json:
            write_json(found.to_json())
            return
        from ralph.cli.workflow_status import show_status

        show_status(found)


@app.command(name="list", cls=HelpCommand)
def list_(json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
          root: RootOption = None) -> None:
    """Every session, oldest first: id, status, state, tasks done and the request."""
    with _service(root) as service:
        found = service.list()
        if json:
            write_json([item.to_json() for item in found])
            return
        if not found:
            sys.stdout.write("no workflow session yet: `ralph workflow start \"...\"` "
                             "starts one\n")
            return
        from ralph.cli.workflow_status import show_list

        show_list(found)


def _run(service: WorkflowService, work: Callable[[], Awaitable[WorkflowOutcome]]) -> None:
    with _errors():
        _drive(service, work)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """One line and the exit code: 1 when no session answers (an unknown id, none running,
    none to resume), 2 for any other bad input."""
    from ralph.workflow.errors import NoSuchWorkflow

    try:
        yield
    except NoSuchWorkflow as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_NO_SESSION) from None
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
