"""`ralph log`: a run's history from the store, as the live view showed it, or followed live
from any process."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.output import error_line, write_json_line
from ralph.errors import RalphError
from ralph.project import find_project_root

if TYPE_CHECKING:  # imported when the command runs: `ralph --help` and the others start faster
    from ralph.store import Frame, Store

RUN_PREFIX = "runs/"
STORE_WAIT_S = 0.5  # --follow in a project with no store yet: how often to look for one


def log(run: Annotated[str | None, typer.Option(
            "--run", metavar="ID", help="This run (default: the latest one).")] = None,
        follow: Annotated[bool, typer.Option(
            "--follow", "-f", help="Keep showing events as they come, from whichever "
                                   "process runs the loop (Ctrl-C ends it).")] = False,
        json: Annotated[bool, typer.Option(
            "--json", help="The events themselves, one JSON object a line.")] = False,
        verbose: Annotated[bool, typer.Option(
            "--verbose", "-v", help="Tool results, reasoning and agent details too.")] = False,
        root: Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                                  help="Project root.")] = None,
        workflow: Annotated[str | None, typer.Option(
            "--workflow", metavar="SESSION_ID",
            help="A `ralph workflow` session's steps instead of a run.")] = None,
        store: Annotated[str | None, typer.Option(
            "--store", metavar="PATH|URL", show_default=False,
            help="Read this store instead of the project's (the postgresql:// store that "
                 "the workers of runs on Temporal share).")] = None) -> None:
    """Show a run's history: iterations, the agent's text and tool calls, gates with the end
    of a failing one's output, verdicts, commits, and the run's summary. With --workflow, a
    workflow session's steps: states, role calls and results, violations, gates, markers
    and commits.

    With --follow, go on with what comes next (a run in progress, and the runs after it;
    with --run, until that run ends). Exit code: 0, or 1 when the run named is unknown."""
    from ralph.loop.paths import ProjectPaths
    from ralph.project import store_location
    from ralph.store import Store

    if workflow is not None and run is not None:
        error_line("--workflow cannot be used with --run")
        raise typer.Exit(2)
    paths = ProjectPaths(root or find_project_root())
    if workflow is not None:
        _workflow_log(paths.store, workflow, follow=follow, json=json)
        return
    # The project's store is where its loop records runs; --store names another (the store
    # that workers of runs on Temporal share).
    location = store_location(store) if store is not None else paths.store
    view = _View(json=json, verbose=verbose)
    try:
        with Store(location, create=False) as opened:
            # Nothing recorded (no store, or the empty directory `ralph init` makes): never
            # create one.
            if not opened.exists:
                if not follow:
                    typer.echo("no run recorded yet", err=True)
                    raise typer.Exit(0 if run is None else 1)
                try:  # the first run creates it
                    while not opened.exists:
                        time.sleep(STORE_WAIT_S)
                except KeyboardInterrupt:
                    raise typer.Exit(0) from None
            _show_log(opened, view, run, follow=follow)
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None


def _show_log(store: Store, view: _View, run: str | None, *, follow: bool) -> None:
    """A run's history (`run`, else the latest), then with `follow` what comes next."""
    import asyncio

    from ralph.loop.events import run_stream

    run_id = run if run is not None else _latest_run(store)
    # One cut for both: what the history shows is up to `cursor`, what --follow shows comes
    # after it (never a frame twice, never one missed).
    cursor = store.last_seq
    if run_id is not None:
        shown = view.show(f for f in store.read(stream=run_stream(run_id)) if f.seq <= cursor)
        if not shown and run is not None and not follow:  # following: it may start yet
            error_line(f"no run {run!r} in {store.display_location} (`ralph log` shows the "
                       "latest; run ids start with run_)")
            raise typer.Exit(1)
        if run is not None and view.ended:
            return
    elif not follow:
        typer.echo("no run recorded yet", err=True)
        return
    if follow:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a follow: exit 0
            asyncio.run(_follow(store, view, cursor, run))


class _View:
    """Frames to the terminal: rendered lines, or JSON lines."""

    def __init__(self, *, json: bool, verbose: bool) -> None:
        from rich.console import Console

        from ralph.cli.render import EventRenderer

        self.json = json
        self.ended = False  # a run.stopped was shown
        self.renderer = EventRenderer(verbose=verbose)
        self.console = Console(file=sys.stdout, highlight=False, soft_wrap=True)

    def show(self, frames: Iterable[Frame]) -> int:
        """Show `frames`; how many there were."""
        from ralph.cli.display import show_lines
        from ralph.cli.render import summary_table

        count = 0
        for frame in frames:
            count += 1
            self.ended = self.ended or frame.topic == "run.stopped"
            if self.json:
                write_json_line(frame.to_dict())
                continue
            show_lines(self.console, frame.ts, self.renderer.feed(frame))
            if frame.topic == "run.stopped" and frame.meta.get("mode") == "run":
                show_lines(self.console, frame.ts, self.renderer.flush())
                shown = frame.meta.get("message") in self.renderer.shown
                self.console.print(summary_table(frame.meta, with_message=not shown))
        return count


async def _follow(store: Store, view: _View, cursor: int, run_id: str | None) -> None:
    """Frames of runs after `cursor`, live; of `run_id` only, until it ends, if given."""
    from ralph.loop.events import run_stream

    stream = run_stream(run_id) if run_id is not None else None
    async with store.subscribe(stream=stream, after_seq=cursor) as frames:
        async for frame in frames:
            if not frame.stream.startswith(RUN_PREFIX):
                continue
            view.show([frame])
            if run_id is not None and frame.topic == "run.stopped":
                return


def _latest_run(store: Store) -> str | None:
    started = store.last("run.started")
    return str(started[0].meta.get("run_id")) if started else None


def _workflow_log(store_dir: Path, session_id: str, *, follow: bool, json: bool) -> None:
    """A workflow session's events (ralph.cli.workflow_view's lines, or JSON lines); with
    `follow`, then live ones until the session stops or reaches a final state."""
    import asyncio

    from ralph.store import Store
    from ralph.workflow.errors import WorkflowError
    from ralph.workflow.record import workflow_stream
    from ralph.workflow.session_dir import validate_session_id

    try:
        validate_session_id(session_id)
    except WorkflowError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None
    if not (store_dir / "head").exists():
        error_line(f"no workflow session {session_id!r}: nothing is recorded yet")
        raise typer.Exit(1)

    def show(frame: Frame) -> bool:
        """Show it; whether the session stopped there."""
        from ralph.cli.workflow_view import describe

        if json:
            write_json_line(frame.to_dict())
        else:
            line = describe(frame)
            if line is not None:
                typer.echo(f"{frame.ts[11:19]} {line}")
        return frame.topic == "workflow.stopped" or (
            frame.topic == "workflow.state" and frame.meta.get("state") in
            ("BLOCKED", "COMPLETE", "FAILED"))

    async def follow_live(store: Store, cursor: int) -> None:
        async with store.subscribe(stream=workflow_stream(session_id),
                                   after_seq=cursor) as frames:
            async for frame in frames:
                if show(frame):
                    return

    try:
        with Store(store_dir) as store:
            cursor = store.last_seq
            shown = 0
            ended = False  # where the history stops: stopped, or in a final state
            for frame in store.read(stream=workflow_stream(session_id)):
                if frame.seq > cursor:
                    break
                shown += 1
                ended = show(frame) or (ended and frame.topic == "workflow.commit")
            if not shown:
                error_line(f"no workflow session {session_id!r} recorded (`ralph workflow "
                           "list` shows them)")
                raise typer.Exit(1)
            if follow and not ended:
                with contextlib.suppress(KeyboardInterrupt):
                    asyncio.run(follow_live(store, cursor))
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None
