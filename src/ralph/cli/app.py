"""The root `ralph` command and its sub-commands."""

from __future__ import annotations

from typing import Annotated

import typer

from ralph import __version__
from ralph.cli import (
    bridge_cmd,
    control_cmd,
    demo,
    doctor_cmd,
    init_cmd,
    log_cmd,
    loop_cmd,
    notes_cmd,
    store_cmd,
    tasks_cmd,
)
from ralph.cli.helpfmt import HelpCommand

app = typer.Typer(
    name="ralph",
    help="Run AI coding agents in a verified loop, and watch and steer them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(store_cmd.app, name="store")
app.add_typer(notes_cmd.app, name="notes")
app.command(name="demo", cls=HelpCommand)(demo.demo)
app.command(name="init", cls=HelpCommand)(init_cmd.init)
app.command(name="step", cls=HelpCommand)(loop_cmd.step)
app.command(name="run", cls=HelpCommand)(loop_cmd.run)
app.command(name="status", cls=HelpCommand)(loop_cmd.status)
app.command(name="log", cls=HelpCommand)(log_cmd.log)
app.command(name="stop", cls=HelpCommand)(control_cmd.stop)
app.command(name="pause", cls=HelpCommand)(control_cmd.pause)
app.command(name="resume", cls=HelpCommand)(control_cmd.resume)
app.command(name="tasks", cls=HelpCommand)(tasks_cmd.tasks)
app.command(name="doctor", cls=HelpCommand)(doctor_cmd.doctor)
app.command(name="bridge", cls=HelpCommand)(bridge_cmd.bridge)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"ralph {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Ralph: run AI coding agents in a verified loop."""
