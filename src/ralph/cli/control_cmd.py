"""`ralph stop`, `ralph pause`, `ralph resume`: steer the project's active run from any
terminal, whichever process runs it (a terminal's `ralph run`, an editor's bridge)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.output import error_line, write_json
from ralph.cli.scale_cmd import NamespaceOption, RunIdOption, TemporalOption
from ralph.errors import RalphError
from ralph.project import find_project_root

RootOption = Annotated[Path | None, typer.Option("--root", metavar="PATH",
                                                 help="Project root.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]


def _control(action: str, root: Path | None, json: bool, run: str | None = None,
             temporal: str | None = None, namespace: str | None = None) -> None:
    import asyncio

    if run is None and (temporal is not None or namespace is not None):
        error_line("--temporal and --namespace need --run ID")
        raise typer.Exit(2)
    if run is not None:
        from ralph.cli.scale_cmd import control_run, finish

        finish(lambda: control_run(action, run, temporal=temporal, namespace=namespace,
                                   json=json))

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


def stop(root: RootOption = None, json: JsonOption = False, run: RunIdOption = None,
         temporal: TemporalOption = None, namespace: NamespaceOption = None) -> None:
    """Stop the active run now: its agent's process tree ends, what it did is committed as
    that attempt's work. With --run, a run on Temporal, from any machine.

    Exit code: 0 the run is stopping, 1 no run is active (or it did not answer)."""
    _control("stop", root, json, run, temporal, namespace)


def pause(root: RootOption = None, json: JsonOption = False, run: RunIdOption = None,
         temporal: TemporalOption = None, namespace: NamespaceOption = None) -> None:
    """Pause the active run before its next iteration (the one under way finishes). With
    --run, a run on Temporal.

    Exit code: 0 paused, 1 no run is active, or it cannot pause (a step)."""
    _control("pause", root, json, run, temporal, namespace)


def resume(root: RootOption = None, json: JsonOption = False, run: RunIdOption = None,
         temporal: TemporalOption = None, namespace: NamespaceOption = None) -> None:
    """Resume a paused run (with --run, a run on Temporal).

    Exit code: 0 resumed, 1 no run is active or it is not paused."""
    _control("resume", root, json, run, temporal, namespace)
