"""`ralph agent run|list|show|watch|stop|approve`: agent sessions from the terminal
(ralph.sessions)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.output import argument_or_stdin, error_line, terminal_safe, write_json
from ralph.errors import RalphError
from ralph.project import find_project_root

if TYPE_CHECKING:
    from ralph.config import Config
    from ralph.sessions import SessionInfo, SessionService
    from ralph.store import Store

app = typer.Typer(help="Agent sessions: run any agent on a prompt outside the loop, and see "
                       "and stop them from any terminal.", no_args_is_help=True)

RootOption = Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                                 help="Project root.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the session(s) as JSON.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q",
                                           help="Show nothing while the agent works.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v",
                                             help="Also show tool results and details.")]
ApprovalsOption = Annotated[str, typer.Option(
    "--approvals", metavar="MODE",
    help="auto (the agent's unattended settings), ask (a person allows or denies each tool "
         "call: here, or with `ralph agent approve`) or deny (only what [approvals] allow "
         "in ralph.toml lists runs).")]
# `ralph agent run`'s exit code by how the session ended (130: stopped, as after Ctrl-C).
EXIT_CODES = {"completed": 0, "stopped": 130}


def _open(root: Path | None, *, create: bool = False) -> tuple[Path, Store]:
    """The project and its store. Only `run` creates the store (after ralph.toml loaded):
    reading commands in a folder that is no project leave nothing behind."""
    from ralph.store import Store

    project = (root or find_project_root()).resolve()
    if not create and not (project / ".ralph").is_dir():
        raise RalphError(f"no Ralph project at {project} (no .ralph/ here or above): run "
                         "`ralph init`, or pass --root")
    return project, Store(project / ".ralph" / "store", create=create)


@contextlib.contextmanager
def _exits() -> Iterator[None]:
    """The reading commands' errors as one line and an exit code: 1 for an unknown
    session, 2 for anything else that is bad input (no project, a store that cannot be
    read)."""
    from ralph.sessions import UnknownSession

    try:
        yield
    except UnknownSession as exc:
        error_line(str(exc))
        raise typer.Exit(1) from None
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None


def _config_if_valid(project: Path) -> Config | None:
    from ralph.config import load_config

    try:
        return load_config(project)
    except RalphError:
        return None


def _service(project: Path, store: Store, *, launching: bool = False) -> SessionService:
    """Sessions of `project`; ralph.toml is read only to launch (a broken one must not keep
    anyone from seeing or stopping a session)."""
    from ralph.config import load_config
    from ralph.sessions import SessionService

    return SessionService(project, load_config(project) if launching else None, store)


def _record(sessions: SessionService, info: SessionInfo, *, texts: bool) -> dict[str, object]:
    from dataclasses import asdict

    record: dict[str, object] = asdict(info)
    if texts:
        record["prompt"] = sessions.text(info.prompt_hash)
        record["final_text"] = sessions.text(info.final_text_hash)
    return record


@app.command(cls=HelpCommand)
def run(
    prompt: Annotated[str, typer.Argument(metavar="PROMPT",
                                          help="What the agent should do; - reads stdin.")],
    agent: Annotated[str | None, typer.Option(
        "--agent", metavar="NAME",
        help="Agent name (default: loop.default_agent in ralph.toml).")] = None,
    title: Annotated[str | None, typer.Option("--title", metavar="TEXT",
                                              help="A title to list it by.")] = None,
    continue_from: Annotated[str | None, typer.Option(
        "--continue", metavar="SESSION_ID",
        help="Continue that session's conversation (its agent keeps the context).")] = None,
    approvals: ApprovalsOption = "auto",
    json: JsonOption = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    detach: Annotated[bool, typer.Option(
        "--detach", help="Print the session's id and leave it running in a background "
                         "process.")] = False,
    root: RootOption = None,
) -> None:
    """Run an agent on PROMPT until it ends, showing what it does on stderr (as `ralph run`
    does); print its final text on stdout (or, with --json, the session). Ctrl-C stops it.
    With --approvals ask, each tool call the rules do not decide is asked on the terminal
    (`Allow Bash: rm -rf build? [y/N]`) when stdin is one.

    Exit code: 0 completed, 1 failed, timed out or lost, 2 bad input, 130 stopped."""
    import asyncio

    from ralph.config import load_config

    text = argument_or_stdin(prompt, "the prompt")
    project = root or find_project_root()
    try:
        load_config(project)  # nothing is made in a folder without a valid ralph.toml
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None
    if approvals not in ("auto", "ask", "deny"):
        error_line(f"unknown approvals mode {approvals!r}: use auto, ask or deny")
        raise typer.Exit(2)
    if detach:
        _detach(project, text, agent, title, continue_from, approvals)
    ended: list[SessionInfo] = []

    async def go(sessions: SessionService) -> None:
        session_id = await sessions.launch(text, agent, title=title,
                                           continue_from=continue_from,
                                           approvals=approvals)  # type: ignore[arg-type]
        sys.stderr.write(f"session {session_id} (`ralph agent stop {session_id}` stops it)\n")
        sys.stderr.flush()
        loop = asyncio.get_running_loop()
        viewer = None if quiet else loop.create_task(
            _show(sessions, session_id, verbose=verbose, skip=("session.started",)))
        asker = None
        if approvals == "ask" and prompt != "-" and sys.stdin.isatty():
            from ralph.cli.approval_prompt import ask_on_terminal

            asker = loop.create_task(ask_on_terminal(sessions, session_id))
        try:
            ended.append(await sessions.wait(session_id))
        except asyncio.CancelledError:  # Ctrl-C
            ended.append(await sessions.stop(session_id, by="ctrl-c"))
        finally:
            if asker is not None:
                asker.cancel()
            if viewer is not None:  # it ends with the session's last frame
                await asyncio.wait([viewer], timeout=5)
                viewer.cancel()

    try:
        project, store = _open(project, create=True)
        with store:
            sessions = _service(project, store, launching=True)
            # Ctrl-C: the session is stopped in `go`; asyncio.run still raises it afterwards
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(go(sessions))
            if not ended:
                raise typer.Exit(130)
            _print_ended(sessions, ended[0], json=json)
    except RalphError as exc:  # bad input: an empty prompt, an unknown agent, ralph.toml, ...
        error_line(str(exc))
        raise typer.Exit(2) from None
    raise typer.Exit(EXIT_CODES.get(ended[0].status, 1))


def _print_ended(sessions: SessionService, info: SessionInfo, *, json: bool) -> None:
    """The final text on stdout (or the record, as JSON); how it ended on stderr if badly."""
    if json:
        write_json(_record(sessions, info, texts=True))
        return
    final = sessions.text(info.final_text_hash).rstrip("\n")
    if final:
        typer.echo(final)
    if info.status != "completed":
        error_line(f"session {info.session_id} {info.status.replace('_', ' ')}: "
                   f"{terminal_safe(info.message or '')}")


def _detach(project: Path, prompt: str, agent: str | None, title: str | None,
            continue_from: str | None, approvals: str) -> None:
    """Start the session in a background process of its own (ralph.sessions.detached), print
    its id and exit: 0 launched, 2 refused (its one-line error on stderr)."""
    import subprocess

    argv = [sys.executable, "-m", "ralph.sessions.detached", str(project)]
    argv += ["--agent", agent] if agent else []
    argv += ["--title", title] if title else []
    argv += ["--continue", continue_from] if continue_from else []
    argv += ["--approvals", approvals]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(prompt)
    child.stdin.close()
    first = child.stdout.readline().rstrip("\n")
    child.stdout.close()
    if not first.startswith("ses_"):
        child.wait()
        error_line(first.removeprefix("error: ") or "the background process ended at once")
        raise typer.Exit(2)
    typer.echo(first)
    raise typer.Exit(0)


async def _show(sessions: SessionService, session_id: str, *, verbose: bool,
                skip: tuple[str, ...] = ()) -> None:
    """The session's frames through the live view `ralph run` uses (ralph.cli.display)."""
    from ralph.cli.display import RunDisplay

    display = RunDisplay(verbose=verbose)
    try:
        async for frame in sessions.watch(session_id):
            if frame.topic in skip:
                display.renderer.feed(frame)  # what it says is known (its mode), not shown
            else:
                display(frame)
    finally:
        display.close()


@app.command(cls=HelpCommand)
def watch(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session's id.")],
    verbose: VerboseOption = False,
    root: RootOption = None,
) -> None:
    """Follow an agent session from any terminal: what it did so far, then live, until it
    ends (Ctrl-C stops watching, not the session).

    Exit code: 0 it ended completed, 1 it ended otherwise or there is no such session."""
    import asyncio

    with _exits():
        project, store = _open(root)
        with store:
            sessions = _service(project, store)
            try:
                asyncio.run(_show(sessions, session_id, verbose=verbose))
            except KeyboardInterrupt:
                raise typer.Exit(130) from None
            status = sessions.get(session_id).status
    raise typer.Exit(0 if status == "completed" else 1)


@app.command(name="list", cls=HelpCommand)
def list_(
    limit: Annotated[int, typer.Option("--limit", metavar="N", callback=at_least(1, 1_000_000),
                                       help="At most this many.")] = 50,
    all_: Annotated[bool, typer.Option(
        "--all", help="Also the agent CLIs' own conversations here (Claude Code, Codex).")
    ] = False,
    json: JsonOption = False,
    root: RootOption = None,
) -> None:
    """The agent sessions of this project, newest first (with --all, then the CLIs' own
    conversations, which `ralph agent run --continue ID` continues)."""
    from dataclasses import asdict

    from ralph.cli.texttable import Cell, Column, print_table
    from ralph.sessions import SessionService

    with _exits():
        project, store = _open(root)
        with store:
            # The agents' env in ralph.toml may say where the CLIs keep their conversations.
            sessions = SessionService(project, _config_if_valid(project) if all_ else None,
                                      store)
            found = sessions.list(limit=limit)
            native = sessions.native() if all_ else []
            if json:
                write_json([_record(sessions, info, texts=False) for info in found] +
                           [{"kind": "native", **asdict(c)} for c in native])
                return
    if not found and not native:
        typer.echo("no agent sessions")
        return
    rows: list[list[Cell]] = [
        [[(info.session_id, "")], [(terminal_safe(info.agent), "")],
         [(info.status.replace("_", " "), "")],
         [(info.started_at[:19].replace("T", " "), "")],
         [(terminal_safe(info.title or ""), "")]] for info in found]
    rows += [[[(c.id, "")], [(c.adapter, "")], [(f"{c.messages} messages", "")],
              [((c.first_at or "")[:19].replace("T", " "), "")],
              [(terminal_safe(c.summary), "")]] for c in native]
    print_table([Column("id"), Column("agent"), Column("status"), Column("started"),
                 Column("title", wrap=True)], rows)


@app.command(cls=HelpCommand)
def show(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session's id.")],
    json: JsonOption = False,
    root: RootOption = None,
) -> None:
    """One agent session: what it was asked, how it ended, its final text.

    Exit code: 0 shown, 1 no such session."""
    with _exits():
        project, store = _open(root)
        with store:
            sessions = _service(project, store)
            info = sessions.get(session_id)
            record = _record(sessions, info, texts=True)
            waiting = sessions.pending(session_id)
            record["pending_approvals"] = [
                {"tool_use_id": r.tool_use_id, "tool_name": r.tool_name, "input": r.input}
                for r in waiting]
    if json:
        write_json(record)
        return
    lines = [f"session {info.session_id}: {info.agent}, {info.status.replace('_', ' ')}",
             f"started {info.started_at}" + (f", finished {info.finished_at}"
                                             if info.finished_at else ""),
             f"cwd {info.cwd}", f"log {info.log_path}"]
    if info.title:
        lines.insert(1, f"title {terminal_safe(info.title)}")
    if info.message:
        lines.append(f"message {terminal_safe(info.message)}")
    if info.approvals != "auto":
        lines.append(f"approvals {info.approvals}")
    for request in waiting:
        from ralph.cli.render import approval_subject

        subject = approval_subject({"tool_name": request.tool_name, "input": request.input})
        lines.append(f"waiting for an answer: {subject}  (ralph agent approve "
                     f"{info.session_id} {terminal_safe(request.tool_use_id)} --allow|--deny)")
    lines += ["", "prompt:", str(record["prompt"]).rstrip("\n")]
    if record["final_text"]:
        lines += ["", "final text:", str(record["final_text"]).rstrip("\n")]
    typer.echo("\n".join(lines))


@app.command(cls=HelpCommand)
def stop(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session's id.")],
    root: RootOption = None,
) -> None:
    """Stop an agent session wherever it runs: its agent's whole process tree ends.

    Exit code: 0 stopped (or it had ended already), 1 no such session, or its owner did
    not answer."""
    import asyncio

    with _exits():
        project, store = _open(root)
        with store:
            info = asyncio.run(_service(project, store).stop(session_id, by="ralph agent stop"))
    if info.status == "running":
        error_line(f"session {info.session_id} is still running: the process that runs it "
                   f"(pid {info.owner_pid}) did not answer the stop")
        raise typer.Exit(1)
    typer.echo(f"session {info.session_id}: {info.status.replace('_', ' ')}")


@app.command(cls=HelpCommand)
def approve(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The session's id.")],
    tool_use_id: Annotated[str, typer.Argument(
        metavar="TOOL_USE_ID", help="The request's id (`ralph agent show ID` lists them).")],
    allow: Annotated[bool, typer.Option("--allow", help="Let the tool call run.")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="Refuse it.")] = False,
    message: Annotated[str, typer.Option(
        "--message", "-m", metavar="TEXT",
        help="Why (a denial's reason reaches the agent).")] = "",
    root: RootOption = None,
) -> None:
    """Answer a tool-permission request of a running session (approvals ask), wherever it
    runs.

    Exit code: 0 answered, 1 no such session or the request is not waiting for an answer
    (nothing recorded), 2 neither or both of --allow and --deny."""
    from ralph.approvals.desk import NotPending

    if allow == deny:
        error_line("say --allow or --deny (one of them)")
        raise typer.Exit(2)
    with _exits():
        project, store = _open(root)
        with store:
            try:
                answer = _service(project, store).answer(
                    session_id, tool_use_id, "allow" if allow else "deny", message,
                    by="ralph agent approve")
            except NotPending as exc:
                error_line(str(exc))
                raise typer.Exit(1) from None
    typer.echo(f"{tool_use_id}: {'allowed' if answer.decision == 'allow' else 'denied'}")
