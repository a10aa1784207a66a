"""Notes as the remote API's events: `event/note_added` (an extension: the document
predates notes), the note as `notes/list` gives it, for every `ralph.<session>.note` frame,
whoever wrote it (`ralph notes add`, an agent, a client's `notes/add`), with its `seq`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ralph.notes import note_session, note_with_text
from ralph.store import Frame

Event = tuple[str, dict[str, Any]]
NOTE_ADDED = "event/note_added"


def note_events(frame: Frame, text: Callable[[str | None], str]) -> list[Event]:
    """The event of a note's frame (none for other frames); `text(hash)` reads its text."""
    if note_session(frame) is None:
        return []
    note = note_with_text(frame, text(frame.hash))
    return [] if note is None else [(NOTE_ADDED, note.to_dict())]
