"""`ralph notes ...`: session notes (completed, in_progress, blocked, ...) in the store."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.cli.helpfmt import HelpCommand, at_least
from ralph.cli.options import StoreOption, open_store
from ralph.cli.output import terminal_safe, write_json, write_json_line
from ralph.notes import DEFAULT_SESSION, NOTE_TYPES, Note, add_note, group_by_type, list_notes
from ralph.store.frame import MAX_SEQ

if TYPE_CHECKING:
    from rich.console import Console

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
    store: StoreOption = None,
) -> None:
    """Add a note and print it as JSON."""
    with open_store(store, create=True) as opened:
        note = add_note(opened, note_type.value, text, session=name, iteration=iteration)
    write_json_line(note.to_dict())


@app.command(name="list", cls=HelpCommand)
def list_(
    note_type: Annotated[NoteTypeChoice | None, typer.Option(
        "--type", metavar="TYPE", help=f"Only notes of this kind: {_TYPES}.",
        case_sensitive=True)] = None,
    name: Annotated[str | None, typer.Option("--name", metavar="NAME",
                                             help="Only this session (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    store: StoreOption = None,
) -> None:
    """List notes, grouped by type."""
    with open_store(store) as opened:
        notes = list_notes(opened, note_type=note_type.value if note_type else None,
                           session=name)
    if as_json:
        write_json([note.to_dict() for note in notes])
        return
    print_notes(notes)


def print_notes(notes: list[Note], console: Console | None = None) -> None:
    """Notes grouped by type, in the order of the types."""
    from rich.console import Console
    from rich.markup import escape

    out = console or Console(file=sys.stdout, highlight=False, soft_wrap=True, emoji=False)
    if not notes:
        out.print("no notes")
        return
    sessions = {note.session for note in notes}
    for note_type, group in group_by_type(notes).items():
        out.print(f"[bold]{note_type}[/bold] ({len(group)})")
        for note in group:
            where = f"iteration {note.iteration}" if note.iteration is not None else "-"
            who = f"{note.session} " if len(sessions) > 1 else ""
            text = escape(terminal_safe(note.text.strip()))
            out.print(f"  {note.ts[:19].replace('T', ' ')}  {who}{where:<12} {text}")
