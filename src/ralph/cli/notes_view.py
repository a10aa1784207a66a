"""`ralph notes list`: notes from the store, grouped by type, or as JSON.

No Typer here: ralph.cli.fastpath runs a plain `ralph notes list` without importing it, and
notes_cmd holds the command's declaration."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.cli.output import terminal_safe, write_json
from ralph.cli.storeopen import open_store
from ralph.notes import Note, group_by_type, list_notes

if TYPE_CHECKING:
    from rich.console import Console


def show_notes(note_type: str | None, name: str | None, as_json: bool,
               store: Path | None) -> None:
    """Notes of one type (`note_type`) and session (`name`), or all, from the store at `store`
    (default: ralph.project.store_path)."""
    with open_store(store) as opened:
        notes = list_notes(opened, note_type=note_type, session=name)
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
