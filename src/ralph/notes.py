"""Notes: session notes (completed, in_progress, blocked, remaining, learning, decision), a
projection over `ralph.<name>.note` frames.

A note is a frame on topic `ralph.<session>.note` in stream `sessions/<session>`, with meta
`{"type": ..., "iteration": N, "resolves": [ID, ...]}` (iteration and resolves left out when
not given) and its text in the content store, so that any store client (`ralph store
append`) can write one.

A note may settle earlier notes of its session (`resolves`: their ids): a `completed` note
settles the `remaining` or `in_progress` one it finishes, an `in_progress` note the
`remaining` one it takes up. What is still open (`open_notes`) is a projection: the
`remaining`, `in_progress` and `blocked` notes no later note resolves.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from ralph.store.errors import StoreError

if TYPE_CHECKING:
    from ralph.store import Frame, Store

log = logging.getLogger("ralph.notes")

NoteType = Literal["completed", "in_progress", "blocked", "remaining", "learning", "decision"]
NOTE_TYPES: tuple[str, ...] = get_args(NoteType)
OPEN_TYPES = ("remaining", "in_progress", "blocked")  # what a session still has to settle
DEFAULT_SESSION = "default"
_SESSION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")  # also a stream part: sessions/<name>


class NoteError(StoreError, ValueError):
    """A note that cannot be recorded as given."""


@dataclass(frozen=True)
class Note:
    id: str
    seq: int
    ts: str
    session: str
    type: str
    iteration: int | None
    text: str
    resolves: tuple[str, ...] = ()  # ids of the earlier notes of its session it settles

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["resolves"] = list(self.resolves)
        return data


def check_session(name: str) -> str:
    if not _SESSION.fullmatch(name) or len(name) > 200:
        raise NoteError(f"invalid session name {name!r}: use letters, digits, '_' and '-', "
                        "starting with a letter, digit or '_' (at most 200)")
    return name


def note_topic(session: str) -> str:
    return f"ralph.{check_session(session)}.note"


def session_stream(session: str) -> str:
    return f"sessions/{check_session(session)}"


def add_note(store: Store, note_type: str, text: str, *, session: str = DEFAULT_SESSION,
             iteration: int | None = None, resolves: Sequence[str] = ()) -> Note:
    """Record a note; its text goes to the content store. `resolves`: ids of notes of the
    same session that it settles (NoteError for one that is not there)."""
    if note_type not in NOTE_TYPES:
        raise NoteError(f"invalid note type {note_type!r}: use one of {', '.join(NOTE_TYPES)}")
    if not text.strip():
        raise NoteError("a note needs some text")
    if iteration is not None and iteration < 1:
        raise NoteError("iteration must be 1 or more")
    settled = tuple(dict.fromkeys(resolves))
    if settled:
        known = {note.id for note in list_notes(store, session=session)}
        missing = [note_id for note_id in settled if note_id not in known]
        if missing:
            raise NoteError(f"no note {missing[0]} in session {session!r} to resolve: "
                            f"`ralph notes list --name {session} --json` shows their ids")
    meta: dict[str, Any] = {"type": note_type}
    if iteration is not None:
        meta["iteration"] = iteration
    if settled:
        meta["resolves"] = list(settled)
    frame = store.append(note_topic(session), meta, content=text,
                         stream=session_stream(session))
    return Note(frame.id, frame.seq, frame.ts, session, note_type, iteration, text, settled)


def note_session(frame: Frame) -> str | None:
    """The session whose note `frame` is (None: not a note)."""
    parts = frame.topic.split(".")
    if len(parts) != 3 or parts[0] != "ralph" or parts[2] != "note":
        return None
    return parts[1]


def note_from_frame(store: Store, frame: Frame) -> Note | None:
    """The note a frame records, or None if the frame is not a note."""
    if note_session(frame) is None:
        return None
    text = ""
    if frame.hash is not None:
        try:
            text = store.cas_get(frame.hash).decode("utf-8", "replace")
        except StoreError as exc:
            log.warning("note %s: %s", frame.id, exc)
    return note_with_text(frame, text)


def note_with_text(frame: Frame, text: str) -> Note | None:
    """The note a frame records, its text read already (None: the frame is not a note)."""
    session = note_session(frame)
    if session is None:
        return None
    iteration = frame.meta.get("iteration")
    resolves = frame.meta.get("resolves")
    settled = (tuple(item for item in resolves if isinstance(item, str))
               if isinstance(resolves, list) else ())
    return Note(frame.id, frame.seq, frame.ts, session, str(frame.meta.get("type")),
                iteration if isinstance(iteration, int) else None, text, settled)


def list_notes(store: Store, *, note_type: str | None = None,
               session: str | None = None, open_only: bool = False) -> list[Note]:
    """Notes in the order they were added, of one session or of all; with `open_only`,
    only those still open (`open_notes`)."""
    if note_type is not None and note_type not in NOTE_TYPES:
        raise NoteError(f"invalid note type {note_type!r}: use one of {', '.join(NOTE_TYPES)}")
    topic = note_topic(session) if session is not None else "ralph.*"
    found = (note_from_frame(store, frame) for frame in store.read(topic=topic))
    notes = [n for n in found if n is not None]
    if open_only:
        notes = open_notes(notes)
    return [n for n in notes if note_type is None or n.type == note_type]


def open_notes(notes: Sequence[Note]) -> list[Note]:
    """The `remaining`, `in_progress` and `blocked` notes that no note of their session
    resolves, in their order."""
    settled = {(note.session, note_id) for note in notes for note_id in note.resolves}
    return [note for note in notes
            if note.type in OPEN_TYPES and (note.session, note.id) not in settled]


class NoteFeed:
    """All sessions' notes, kept and extended with the ones added since the last call: the
    loop shows them in every prompt, and reading every note (and its text) again each
    iteration would cost time in proportion to the notes ever written."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._notes: list[Note] = []
        self._seen = 0  # the last seq read
        # The session streams' files (name, inode, size, mtime) when last read.
        self._files: list[tuple[str, int, int, int]] | None = None

    def notes(self) -> list[Note]:
        # Notes are written to the session streams (add_note): while none of their files
        # changed there is nothing new, and the store's index need not catch up with the
        # loop's own events to say so.
        files = self._session_files()
        if files is not None and files == self._files:
            return self._notes
        for frame in self.store.read(topic="ralph.*", after_seq=self._seen):
            self._seen = max(self._seen, frame.seq)
            note = note_from_frame(self.store, frame)
            if note is not None:
                self._notes.append(note)
        self._files = files
        return self._notes

    def _session_files(self) -> list[tuple[str, int, int, int]] | None:
        """(name, inode, size, mtime) of each session stream file; None if unknown (a
        database store has no files to look at)."""
        from ralph.store.filestore import FileStore  # noqa: PLC0415 - loaded with the store

        if not isinstance(self.store, FileStore):
            return None
        directory = self.store.path / "streams" / "sessions"
        try:
            with os.scandir(directory) as entries:
                found = []
                for entry in entries:
                    st = entry.stat(follow_symlinks=False)
                    found.append((entry.name, st.st_ino, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            return []
        except OSError:
            return None
        return sorted(found)


def group_by_type(notes: list[Note]) -> dict[str, list[Note]]:
    """Notes grouped by type, in the order of NOTE_TYPES."""
    groups: dict[str, list[Note]] = {t: [] for t in NOTE_TYPES}
    for note in notes:
        groups.setdefault(note.type, []).append(note)
    return {t: group for t, group in groups.items() if group}
