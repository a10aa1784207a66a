"""`ralph nu`: a named session (the ralph.nu way) on the loop service, and `ralph nu done`,
the agent's claim that the session is complete. The work is in ralph.nu; this face parses,
prints and maps outcomes to exit codes."""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.loop_cmd import CleanOption, DirtyOption, QuietOption, VerboseOption
from ralph.cli.options import StoreOption
from ralph.cli.output import error_line
from ralph.nu.options import DEFAULT_AGENT, DEFAULT_MODEL, DEFAULT_PORT, DEFAULT_SPEC, NuOptions

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.cli.display import RunDisplay
    from ralph.nu.service import NuSetup
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
        "--spec", "-s", metavar="PATH", help="The spec file.")] = DEFAULT_SPEC,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", metavar="MODEL",
        help=f"The model the agent uses (opencode: {DEFAULT_MODEL} unless its ralph.toml "
             "section names one).")] = None,
    iterations: Annotated[int, typer.Option(
        "--iterations", "-i", metavar="N", callback=at_least(0),
        help="Iterations to run; 0 = until the session is verified complete.")] = 0,
    port: Annotated[int, typer.Option(
        "--port", metavar="PORT", callback=at_least(1, 65535),
        help="The port of opencode's server.")] = DEFAULT_PORT,
    store: StoreOption = None,
    agent: Annotated[str, typer.Option(
        "--agent", metavar="NAME",
        help="The agent: a ralph.toml [agents.<name>] or a built-in one.")] = DEFAULT_AGENT,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    require_clean: CleanOption = False,
    allow_dirty: DirtyOption = False,
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
    if prompt is None and _piped():
        prompt = _piped_prompt() or None
    options = NuOptions(name=name, prompt=prompt, spec=spec, model=model,
                        iterations=iterations, port=port, agent=agent,
                        require_clean=require_clean, allow_dirty=allow_dirty)
    raise typer.Exit(_run(options, store, quiet, verbose))


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
    from ralph.loop.paths import ProjectPaths
    from ralph.notes import NoteError
    from ralph.nu.record import claim
    from ralph.project import find_project_root

    try:
        lock = ProjectPaths(find_project_root()).lock
        with open_store(store, create=True) as opened:
            frame = claim(opened, name, lock)
    except NoteError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--name' / '-n'") from None
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    n = frame.meta["iteration"]
    print(f"completion of session {name} claimed in iteration #{n}: Ralph checks it when "
          "the iteration ends (no open remaining, in_progress or blocked note, and the "
          "gates pass)")


def _piped() -> bool:
    """stdin is a pipe or a file (`echo ... | ralph nu`, `ralph nu < prompt.txt`): a
    terminal, /dev/null or a socket is no prompt."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _piped_prompt() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8").strip()
    except UnicodeDecodeError:
        error_line("the prompt on stdin is not UTF-8 text")
        raise typer.Exit(EXIT_USAGE) from None


def _run(options: NuOptions, store: str | None, quiet: bool, verbose: bool) -> int:
    from rich.console import Console

    from ralph.cli.display import RunDisplay
    from ralph.cli.loop_cmd import StopSignal, drive
    from ralph.errors import RalphError
    from ralph.nu.service import prepare
    from ralph.project import find_project_root, store_path
    from ralph.store import FileStore

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    stop = StopSignal()
    try:
        root = find_project_root()
        # Absolute: the agent runs in the project root, wherever this was started.
        opened = FileStore(store_path(store).resolve(), create=False)
    except RalphError as exc:
        error_line(str(exc))
        return EXIT_FAILED
    view = _NuView(console, None if quiet else RunDisplay(console, verbose=verbose))
    try:
        setup = prepare(root, options, opened, observer=view)
        view.setup = setup
        if not quiet:
            for warning in setup.warnings:
                console.print(f"warning: {warning}", markup=False)
            console.print(f"Store: {opened.path} (embedded: no server to start)", markup=False)
            if setup.server_port is not None:
                console.print(f"Starting opencode web on port {setup.server_port}...")
        try:
            outcome = drive(setup.service, lambda: setup.run(options), stop,
                            on_signal=lambda: console.print(CLEANING_UP))
        finally:
            view.close()
            setup.service.close()
    except RalphError as exc:
        if view.display is None or not view.display.showed(str(exc)):
            error_line(str(exc))
        return EXIT_FAILED
    finally:
        opened.close()
    if outcome.reason == "stopped":
        return stop.exit_code
    if outcome.reason in ("complete", "max_iterations"):
        if not quiet:
            console.print(outcome.message, markup=False)
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
        self.setup: NuSetup | None = None

    def __call__(self, frame: Frame) -> None:
        setup = self.setup
        if self.display is None or setup is None:
            return
        plan = setup.plan
        if frame.topic == "run.started":
            if setup.server_port is not None:
                url = f"http://localhost:{setup.server_port}"
                if setup.service.server_command == "serve":  # no `web`: no UI of its own
                    self.console.print(f"Server: {url} (opencode serve: this opencode has no "
                                       "web command)")
                else:
                    self.console.print(f"Web UI: {url}")
            self.console.file.write(state_text(plan.store, plan.name))
            self.console.file.flush()
        elif frame.topic == "iteration.started" and plan.current:
            self.console.print(f"\n{plan.title(plan.current)}...", markup=False)
        self.display(frame)

    def close(self) -> None:
        if self.display is not None:
            self.display.close()


def state_text(store: Store, name: str) -> str:
    """The session's state as `ralph nu` shows it at start: its last iterations, and its
    notes by type with their ids (settled ones marked)."""
    import io

    from ralph.cli.notes_view import print_notes
    from ralph.cli.output import terminal_safe
    from ralph.notes import list_notes
    from ralph.nu.record import read_record

    record = read_record(store, name)
    last = record.last
    if not last:
        head = f"Session {name}: no iterations yet"
    elif record.complete():
        head = f"Session {name}: verified complete at iteration #{last}"
    else:
        head = (f"Session {name}: {last} iteration{'s' if last != 1 else ''} so far, "
                f"continuing from iteration #{last + 1}")
    lines = [head]
    for n in sorted(record.completed)[-5:]:
        meta = record.completed[n].meta
        verdict = "verified complete" if meta.get("verified") else meta.get("reason")
        lines.append(terminal_safe(f"  #{n} {meta.get('status')}"
                                   + (f": {verdict}" if verdict else "")))
    out = io.StringIO()
    notes = list_notes(store, session=name)
    if notes:
        print_notes(notes, out=out, ids=True)
    return "\n".join(lines) + "\n" + out.getvalue()
