"""`ralph stop`, `ralph pause`, `ralph resume`: steer the project's active run from any
terminal, whichever process runs it (a terminal's `ralph run`, an editor's bridge)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.output import error_line, write_json
from ralph.errors import RalphError
from ralph.project import find_project_root

RootOption = Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                                 help="Project root.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]


def _control(action: str, root: Path | None, json: bool) -> None:
    import asyncio

    from ralph.loop import LoopService

    try:
        service = LoopService(root or find_project_root())
        try:
            reply = asyncio.run(service.request(action))  # type: ignore[arg-type]
        finally:
            service.close()
    except RalphError as exc:
        error_line(str(exc))
        raise typer.Exit(2) from None
    if json:
        write_json(reply.model_dump(mode="json"))
    else:
        typer.echo(reply.message)
    raise typer.Exit(0 if reply.ok else 1)


def stop(root: RootOption = None, json: JsonOption = False) -> None:
    """Stop the active run now: its agent's process tree ends, what it did is committed as
    that attempt's work.

    Exit code: 0 the run is stopping, 1 no run is active (or it did not answer)."""
    _control("stop", root, json)


def pause(root: RootOption = None, json: JsonOption = False) -> None:
    """Pause the active run before its next iteration (the one under way finishes).

    Exit code: 0 paused, 1 no run is active, or it cannot pause (a step)."""
    _control("pause", root, json)


def resume(root: RootOption = None, json: JsonOption = False) -> None:
    """Resume a paused run.

    Exit code: 0 resumed, 1 no run is active or it is not paused."""
    _control("resume", root, json)
