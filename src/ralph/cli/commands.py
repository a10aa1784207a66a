"""The root `ralph` command, and where each sub-command lives.

Commands are registered by name and imported only when needed: `ralph status` builds a root
command holding `status` alone, so it neither imports nor inspects the other commands' modules
(the loop's agents, asyncio, the store, Rich's live display). `ralph --help`, a bare `ralph`
and a mistyped command build them all, to list them and suggest the closest name.

The root is built through Typer's own `add_typer`/`command` exactly as a fully registered
app is, so a command's help, usage errors and exit codes do not depend on which of its
siblings were loaded.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from ralph import __version__
from ralph.cli.helpfmt import HelpCommand

# name -> (module, attribute); a Typer attribute is a group (`ralph store ...`). In the order
# of `ralph --help` (Typer lists commands before groups).
COMMANDS: dict[str, tuple[str, str]] = {
    "store": ("ralph.cli.store_cmd", "app"),
    "notes": ("ralph.cli.notes_cmd", "app"),
    "demo": ("ralph.cli.demo", "demo"),
    "init": ("ralph.cli.init_cmd", "init"),
    "step": ("ralph.cli.loop_cmd", "step"),
    "run": ("ralph.cli.loop_cmd", "run"),
    "status": ("ralph.cli.loop_cmd", "status"),
    "log": ("ralph.cli.log_cmd", "log"),
    "stop": ("ralph.cli.control_cmd", "stop"),
    "pause": ("ralph.cli.control_cmd", "pause"),
    "resume": ("ralph.cli.control_cmd", "resume"),
    "tasks": ("ralph.cli.tasks_cmd", "tasks"),
    "doctor": ("ralph.cli.doctor_cmd", "doctor"),
    "bridge": ("ralph.cli.bridge_cmd", "bridge"),
    "agent": ("ralph.cli.agent_cmd", "app"),
    "serve": ("ralph.cli.serve_cmd", "serve"),
    "company": ("ralph.cli.company_cmd", "app"),
    "workflow": ("ralph.cli.workflow_cmd", "app"),
    "nu": ("ralph.cli.nu_cmd", "app"),
    "xs": ("ralph.cli.xs_cmd", "app"),
    "worker": ("ralph.cli.scale_cmd", "worker"),
}


def build_app(command: str | None = None) -> typer.Typer:
    """The `ralph` Typer app with every command, or with `command` alone when it names one
    (the first word of the command line: anything else, such as an option or a typo, needs
    them all)."""
    app = typer.Typer(
        name="ralph",
        help="Run AI coding agents in a verified loop, and watch and steer them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    names = [command] if command in COMMANDS else list(COMMANDS)
    for name in names:
        module, attribute = COMMANDS[name]
        target: Any = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name)
        else:
            app.command(name=name, cls=HelpCommand)(target)
    app.callback()(root)
    return app


def _show_version(value: bool) -> None:
    # `ralph --version` alone is answered before Typer is imported (ralph.cli.main); this is
    # `ralph --version` with more words after it, which Typer handles as an eager option.
    if value:
        typer.echo(f"ralph {__version__}")
        raise typer.Exit(0)


def root(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Ralph: run AI coding agents in a verified loop."""
