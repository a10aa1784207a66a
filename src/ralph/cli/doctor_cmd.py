"""`ralph doctor`: which agents can run here, and what is wrong with the others."""

from __future__ import annotations

from typing import Annotated

import typer

from ralph.cli.output import write_json
from ralph.project import find_project_root


def doctor(json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List every agent adapter: binary found or not, version, login, the command Ralph will
    run.

    Exit code 0 when the default agent can run, 1 when it cannot (its program cannot start,
    or it is certainly not logged in)."""
    import asyncio

    from rich.console import Console
    from rich.markup import escape

    from ralph.agents.doctor import diagnose
    from ralph.config import load_config

    root = find_project_root()
    config = load_config(root, required=False)
    reports = asyncio.run(diagnose(config, root))
    if json:
        write_json([r.to_dict() for r in reports])
    else:
        out = Console(highlight=False, soft_wrap=True)
        for r in reports:
            name = f"{r.agent} (default)" if r.default else r.agent
            verdict = "[green]ok[/green]" if r.ok else "[red]" + escape(
                "; ".join(r.problems)) + "[/red]"
            out.print(f"[bold]{escape(name)}[/bold] ({r.adapter} adapter): {verdict}")
            found = r.path or "not found"
            out.print(f"  binary:  {escape(found)}"
                      + (f" ({escape(r.version)})" if r.version else ""))
            if r.login:
                out.print(f"  login:   {_login(r.logged_in, r.login)}")
            out.print(f"  command: {escape(' '.join(r.argv))} (prompt via {r.prompt_via})")
            if r.model or r.env:
                out.print(f"  model:   {escape(r.model or '-')}; env: "
                          f"{escape(', '.join(r.env) or '-')}")
        if not any(r.adapter == "command" for r in reports):
            out.print("[bold]command adapter[/bold]: any program, not used here: define "
                      "\\[agents.<name>] with argv = [...] in ralph.toml (the prompt goes "
                      "to its stdin, or to an argv element {prompt} or {prompt_file})")
    default = next((r for r in reports if r.default), None)
    raise typer.Exit(0 if default is None or default.ok else 1)


def _login(logged_in: bool | None, login: str) -> str:
    """yes: what was found; no: the fix (in colour: it blocks the runs that use the agent);
    unknown: why it cannot be told."""
    from rich.markup import escape

    if logged_in is True:
        return f"[green]yes[/green]: {escape(login)}"
    if logged_in is False:
        return f"[yellow]no[/yellow]: {escape(login)}"
    return f"cannot tell: {escape(login)}"
