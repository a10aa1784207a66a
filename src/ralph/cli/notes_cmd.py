"""`ralph notes ...`: session notes (completed, in_progress, blocked, ...) in the store.

`list`'s work is in ralph.cli.notes_view (no Typer: ralph.cli.fastpath runs it directly)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.options import StoreOption, open_store
from ralph.cli.output import write_json_line
from ralph.notes import DEFAULT_SESSION, NOTE_TYPES, add_note
from ralph.store.frame import MAX_SEQ

app = typer.Typer(help="Record and list session notes.", no_args_is_help=True)

_TYPES = ", ".join(NOTE_TYPES)
NoteTypeChoice = StrEnum("NoteTypeChoice", {t: t for t in NOTE_TYPES})  # type: ignore[misc]


@app.command(cls=HelpCommand)
def add(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The note.")],
    note_type: Annotated[NoteTypeChoice, typer.Option(
        "--type", metavar="TYPE", help=f"What kind of note: {_TYPES}.", case_sensitive=True)],
    name: Annotated[str, typer.Option("--name", metavar="NAME",
                                      help="Session name.")] = DEFAULT_SESSION,
    iteration: Annotated[int | None, typer.Option("--iteration", metavar="N",
                                                  callback=at_least(1, MAX_SEQ),
                                                  help="Iteration it belongs to.")] = None,
    resolves: Annotated[list[str] | None, typer.Option(
        "--resolves", metavar="ID",
        help="A note of the session this one settles (repeat for more).")] = None,
    store: StoreOption = None,
) -> None:
    """Add a note and print it as JSON."""
    with open_store(store, create=True) as opened:
        note = add_note(opened, note_type.value, text, session=name, iteration=iteration,
                        resolves=resolves or ())
    write_json_line(note.to_dict())


@app.command(name="list", cls=HelpCommand)
def list_(
    note_type: Annotated[NoteTypeChoice | None, typer.Option(
        "--type", metavar="TYPE", help=f"Only notes of this kind: {_TYPES}.",
        case_sensitive=True)] = None,
    name: Annotated[str | None, typer.Option("--name", metavar="NAME",
                                             help="Only this session (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    open_only: Annotated[bool, typer.Option(
        "--open", help="Only what is still open: remaining, in_progress and blocked notes "
                       "no later note resolves.")] = False,
    store: StoreOption = None,
) -> None:
    """List notes, grouped by type."""
    from ralph.cli.notes_view import show_notes

    show_notes(note_type.value if note_type else None, name, as_json, store,
               open_only=open_only)
