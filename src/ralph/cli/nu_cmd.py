"""`ralph nu`: a named session (the ralph.nu way) on the loop service, and `ralph nu done`,
the agent's claim that the session is complete. The work is in ralph.nu; this face parses,
prints and maps outcomes to exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.options import StoreOption
from ralph.cli.output import error_line

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.cli.display import RunDisplay
    from ralph.nu.plan import NuPlan
    from ralph.store import Frame, Store

EXIT_OK = 0  # verified complete, or the iterations asked for were run
EXIT_FAILED = 1  # an error, no progress, a budget
EXIT_USAGE = 2
CLEANING_UP = "Cleaning up background jobs..."

app = typer.Typer(help="Named sessions: iterations of one agent on a spec, attached to one "
                       "long-lived opencode server, the session's notes in the event store.")


@app.callback(invoke_without_command=True)
def nu(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Option(
        "--name", "-n", metavar="NAME",
        help="The session's name (required): letters, digits, '_' and '-'.")] = None,
    prompt: Annotated[str | None, typer.Option(
        "--prompt", "-p", metavar="TEXT",
        help="A prompt of your own instead of PROMPT_nu.md (also read from a pipe on "
             "stdin), with the template's placeholders filled in.")] = None,
    spec: Annotated[str, typer.Option(
        "--spec", "-s", metavar="PATH", help="The spec file.")] = "./specs/SPEC.md",
    model: Annotated[str | None, typer.Option(
        "--model", "-m", metavar="MODEL",
        help="The model the agent uses (opencode: anthropic/claude-sonnet-4-5 unless its "
             "ralph.toml section names one).")] = None,
    iterations: Annotated[int, typer.Option(
        "--iterations", "-i", metavar="N", callback=at_least(0),
        help="Iterations to run; 0 = until the session is verified complete.")] = 0,
    port: Annotated[int, typer.Option(
        "--port", metavar="PORT", callback=at_least(1, 65535),
        help="The port of opencode's server.")] = 4096,
    store: StoreOption = None,
    agent: Annotated[str, typer.Option(
        "--agent", metavar="NAME",
        help="The agent: a ralph.toml [agents.<name>] or a built-in one.")] = "opencode",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Show nothing while it runs.")
                     ] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Show tool results, reasoning and agent details too.")] = False,
) -> None:
    """Run the named session NAME: each iteration a fresh agent on the spec, attached to one
    opencode server (`opencode run --attach URL --title "NAME - Iteration #N"`), its notes
    in the event store, until the session is verified complete, --iterations are run, or
    Ctrl-C.

    Exit code: 0 verified complete or the iterations run, 1 an error or no progress, 2 bad
    usage, 130 stopped (Ctrl-C, SIGTERM, `ralph stop`)."""
    if ctx.invoked_subcommand is not None:
        return
    if name is None:
        raise typer.BadParameter("a session needs a name", param_hint="'--name' / '-n'")
    from ralph.notes import NoteError, check_session

    try:
        check_session(name)
    except NoteError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--name' / '-n'") from None
    if prompt is None and not sys.stdin.isatty():
        piped = _piped_prompt()
        prompt = piped or None
    raise typer.Exit(_run(name, prompt, spec, model, iterations, port, store, agent,
                          quiet, verbose))


@app.command(cls=HelpCommand)
def done(
    name: Annotated[str, typer.Option("--name", "-n", metavar="NAME",
                                      help="The session's name.")],
    store: StoreOption = None,
) -> None:
    """Claim that every task of the session is done (for the agent, during an iteration).
    Ralph accepts the claim when the iteration ends, if no remaining, in_progress or
    blocked note is open and the gates pass; otherwise the next iteration is told why."""
    from ralph.cli.storeopen import open_store
    from ralph.errors import RalphError
    from ralph.notes import NoteError
    from ralph.nu.record import claim

    try:
        with open_store(store, create=True) as opened:
            frame = claim(opened, name)
    except NoteError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--name' / '-n'") from None
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    n = frame.meta["iteration"]
    print(f"completion of session {name} claimed in iteration #{n}: Ralph checks it when "
          "the iteration ends (no open remaining, in_progress or blocked note, and the "
          "gates pass)")


def _piped_prompt() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8").strip()
    except UnicodeDecodeError:
        error_line("the prompt on stdin is not UTF-8 text")
        raise typer.Exit(EXIT_USAGE) from None


def _run(name: str, prompt: str | None, spec: str, model: str | None, iterations: int,
         port: int, store: Path | None, agent: str, quiet: bool, verbose: bool) -> int:
    from rich.console import Console

    from ralph.cli.display import RunDisplay
    from ralph.cli.loop_cmd import _drive, _Stop
    from ralph.cli.storeopen import open_store
    from ralph.errors import RalphError
    from ralph.nu.service import NuOptions, prepare
    from ralph.project import find_project_root

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    options = NuOptions(name=name, prompt=prompt, spec=spec, model=model,
                        iterations=iterations, port=port, agent=agent)
    stop = _Stop()
    try:
        root = find_project_root()
        opened = open_store(store, create=True)
    except RalphError as exc:
        error_line(str(exc))
        return EXIT_FAILED
    view = _NuView(console, None if quiet else RunDisplay(console, verbose=verbose))
    try:
        setup = prepare(root, options, opened, observer=view)
        view.plan = setup.plan
        view.port = setup.server_port
        if not quiet:
            console.print(f"Store: {opened.path} (embedded: no server to start)")
            if setup.server_port is not None:
                console.print(f"Starting opencode web on port {setup.server_port}...")
        try:
            outcome = _drive(setup.service, lambda: setup.service.run(
                agent, setup.max_iterations), stop, on_signal=lambda: console.print(CLEANING_UP))
        finally:
            view.close()
            setup.service.close()
    except RalphError as exc:
        if view.display is None or not view.display.showed(str(exc)):
            error_line(str(exc))
        return EXIT_FAILED
    except typer.Exit:
        raise
    finally:
        opened.close()
    if outcome.reason == "stopped":
        return stop.exit_code
    if outcome.reason in ("complete", "max_iterations"):
        if not quiet:
            console.print(outcome.message)
        return EXIT_OK
    if view.display is None or not view.display.showed(outcome.message):
        error_line(outcome.message)
    return EXIT_FAILED


class _NuView:
    """The loop's live view with the session's own lines: the web UI's address and the
    session's state when the run starts, and each iteration's title."""

    def __init__(self, console: Console, display: RunDisplay | None) -> None:
        self.console = console
        self.display = display
        self.plan: NuPlan | None = None
        self.port: int | None = None

    def __call__(self, frame: Frame) -> None:
        if self.display is None:
            return
        plan = self.plan
        if frame.topic == "run.started" and plan is not None:
            if self.port is not None:
                self.console.print(f"Web UI: http://localhost:{self.port}")
            for line in state_lines(plan.store, plan.name):
                self.console.print(line)
        elif frame.topic == "iteration.started" and plan is not None and plan.current:
            self.console.print(f"\n{plan.title(plan.current)}...")
        self.display(frame)

    def close(self) -> None:
        if self.display is not None:
            self.display.close()


def state_lines(store: Store, name: str) -> list[str]:
    """The session's state as `ralph nu` shows it at start: its last iterations, and its
    notes by type (open ones marked)."""
    from ralph.notes import group_by_type, list_notes, open_notes
    from ralph.nu.record import read_record

    record = read_record(store, name)
    lines = [f"Session {name}: "
             + (f"{record.last} iteration{'s' if record.last != 1 else ''} so far, continuing "
                f"from iteration #{record.last + 1}" if record.last else "new")]
    for n in sorted(record.completed)[-5:]:
        meta = record.completed[n].meta
        verdict = "verified complete" if meta.get("verified") else meta.get("reason")
        lines.append(f"  #{n} {meta.get('status')}" + (f": {verdict}" if verdict else ""))
    notes = list_notes(store, session=name)
    still = {n.id for n in open_notes(notes)}
    for kind, group in group_by_type(notes).items():
        lines.append(f"  {kind}:")
        for note in group:
            mark = "" if note.id in still or kind not in ("remaining", "in_progress",
                                                           "blocked") else " (resolved)"
            text = " ".join(note.text.split())
            lines.append(f"    - [{note.id}] {text[:200]}{mark}")
    return lines
