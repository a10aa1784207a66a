"""`ralph notes list`: notes from the store, grouped by type, or as JSON.

No Typer here: ralph.cli.fastpath runs a plain `ralph notes list` without importing it, and
notes_cmd holds the command's declaration."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from ralph.cli.output import terminal_safe, write_json
from ralph.cli.storeopen import open_store
from ralph.notes import Note, group_by_type, list_notes, open_notes


def show_notes(note_type: str | None, name: str | None, as_json: bool,
               store: str | Path | None, *, open_only: bool = False) -> None:
    """Notes of one type (`note_type`) and session (`name`), or all, from the store at `store`
    (default: ralph.project.store_path); with `open_only`, only those still open."""
    with open_store(store) as opened:
        every = list_notes(opened, session=name)  # (the type was checked by the parser)
    notes = open_notes(every) if open_only else every
    notes = [note for note in notes if note_type is None or note.type == note_type]
    if as_json:
        write_json([note.to_dict() for note in notes])
        return
    print_notes(notes, {(note.session, note_id) for note in every for note_id in note.resolves})


def print_notes(notes: list[Note], settled: set[tuple[str, str]] | None = None, *,
                out: TextIO | None = None, ids: bool = False) -> None:
    """Notes grouped by type, in the order of the types: plain lines, the types in bold on a
    terminal (no Rich console: its import was a third of this command's start-up); `ids`:
    each note's id too (for an agent to resolve it)."""
    from ralph.cli.texttable import styled, uses_colour

    out = out or sys.stdout
    if not notes:
        out.write("no notes\n")
        return
    if settled is None:
        settled = {(note.session, note_id) for note in notes for note_id in note.resolves}
    colour = uses_colour(out)
    sessions = {note.session for note in notes}
    lines = []
    for note_type, group in group_by_type(notes).items():
        lines.append(f"{styled(note_type, 'bold', colour)} ({len(group)})")
        for note in group:
            where = f"iteration {note.iteration}" if note.iteration is not None else "-"
            who = f"{terminal_safe(note.session)} " if len(sessions) > 1 else ""
            text = terminal_safe(note.text.strip())
            mark = " (resolved)" if (note.session, note.id) in settled else ""
            known = f"[{note.id}] " if ids else ""
            lines.append(f"  {note.ts[:19].replace('T', ' ')}  {who}{where:<12} "
                         f"{known}{text}{mark}")
    out.write("\n".join(lines) + "\n")
    out.flush()
