"""progress.md: each task's status marker, read, and moved one line at a time.

A status line is `- [<marker>] <task-id> (<label>)`; the label is optional and agents reword
it, so only the marker and the id count. Markers are exactly `[ ]` `[/]` `[P]` `[x]` `[F]`:
the orchestrator routes on them, so any other marker is an error, not a guess. Everything
else in the file (headings, notes) is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ralph.fsutil import atomic_write_bytes
from ralph.workflow.errors import WorkflowError
from ralph.workflow.session_dir import TASK_ID_PATTERN

# Any checkbox-like bullet followed by an id is a status line, whatever is in the box, so
# that a wrong marker is reported instead of the line being silently skipped.
_LINE_RE = re.compile(
    rf"(?P<indent>\s*)(?P<bullet>[-*])\s+\[(?P<marker>[^\]\n]{{0,12}})\]\s+(?P<id>{TASK_ID_PATTERN})"
    r"(?P<rest>(?![A-Za-z0-9_.-]).*?)(?P<eol>\r?\n?)")
_HEADING_RE = re.compile(r"#{1,6}\s+(?P<title>.*?)\s*#*\s*")


class Marker(StrEnum):
    """A task's status in progress.md."""

    NOT_STARTED = "[ ]"
    IN_PROGRESS = "[/]"
    REVIEW_PENDING = "[P]"
    COMPLETED = "[x]"
    FAILED = "[F]"

    @property
    def label(self) -> str:
        """The standard label written after the id: `- [P] task-2 (Review Pending)`."""
        return _LABELS[self]


_LABELS = {
    Marker.NOT_STARTED: "Not Started",
    Marker.IN_PROGRESS: "In Progress",
    Marker.REVIEW_PENDING: "Review Pending",
    Marker.COMPLETED: "Completed",
    Marker.FAILED: "Failed",
}
_KNOWN = " ".join(marker.value for marker in Marker)


@dataclass(frozen=True)
class ProgressEntry:
    """One status line: the task's marker, its label (None when the line has none) and its
    line number."""

    task_id: str
    marker: Marker
    label: str | None
    line: int


@dataclass(frozen=True)
class ProgressFile:
    """The status lines of progress.md in file order."""

    entries: tuple[ProgressEntry, ...]

    def get(self, task_id: str) -> ProgressEntry | None:
        return next((entry for entry in self.entries if entry.task_id == task_id), None)

    @property
    def markers(self) -> dict[str, Marker]:
        """Each task's marker, by id."""
        return {entry.task_id: entry.marker for entry in self.entries}

    def with_marker(self, *markers: Marker) -> list[str]:
        """Ids of the tasks whose marker is one of `markers`, in file order."""
        return [entry.task_id for entry in self.entries if entry.marker in markers]


def _split_label(rest: str) -> str | None:
    rest = rest.strip()
    whole = re.fullmatch(r"\((?P<label>.*)\)", rest)
    if whole is not None:
        return whole["label"].strip()
    head = re.match(r"\((?P<label>[^)]*)\)", rest)
    return None if head is None else head["label"].strip()


def _lines(text: str) -> list[str]:
    """The lines of `text` with their endings, split at "\n" only: the file's other
    characters (a form feed, \x85, \u2028, which str.splitlines takes for line ends) are
    text of their line, kept as they are; a "\r\n" ending stays whole."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise WorkflowError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise WorkflowError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def _status_lines(text: str, source: str) -> Iterable[tuple[int, re.Match[str], Marker]]:
    """(line number, match, marker) of each status line; a `## Legend` section is skipped
    (it shows markers, it does not set them)."""
    in_legend = False
    in_fence = False
    for number, line in enumerate(_lines(text), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue  # a fenced example shows lines and headings, it is none of them
        heading = _HEADING_RE.fullmatch(line.rstrip("\r\n"))
        if heading is not None:
            in_legend = heading["title"].rstrip(":").strip().lower() == "legend"
            continue
        match = _LINE_RE.fullmatch(line)
        if in_legend or match is None:
            continue
        try:
            marker = Marker(f"[{match['marker']}]")
        except ValueError:
            raise WorkflowError(f"{source}:{number}: unknown marker [{match['marker']}] for "
                                f"{match['id']} (expected one of {_KNOWN})") from None
        yield number, match, marker


def parse_progress(text: str, source: str = "progress.md") -> ProgressFile:
    """The status lines of a progress.md text. WorkflowError `<source>:<line>: ...` for an
    unknown marker or a task listed twice."""
    entries: list[ProgressEntry] = []
    first_line: dict[str, int] = {}
    for number, match, marker in _status_lines(text, source):
        task_id = match["id"]
        if task_id in first_line:
            raise WorkflowError(f"{source}:{number}: duplicate task id {task_id} "
                                f"(first on line {first_line[task_id]})")
        first_line[task_id] = number
        entries.append(ProgressEntry(task_id, marker, _split_label(match["rest"]), number))
    return ProgressFile(tuple(entries))


def read_progress(path: Path) -> ProgressFile:
    """progress.md read and parsed; WorkflowError if it cannot be read."""
    return parse_progress(_read_text(path), source=str(path))


def status_line(task_id: str, marker: Marker, reason: str | None = None) -> str:
    """The standard status line (without indent or newline): `- [x] task-1 (Completed)`,
    `- [F] task-1 (Failed: <reason>)`."""
    label = marker.label
    if reason is not None and reason.strip():
        label = f"{label}: {' '.join(reason.split())}"
    return f"- {marker.value} {task_id} ({label})"


def set_marker(path: Path, task_id: str, marker: Marker, *, reason: str | None = None,
               expect: Iterable[Marker] | None = None) -> Marker:
    """Move `task_id`'s marker in the progress.md at `path` to `marker`, atomically, and
    return the marker it had.

    Only that task's line changes (its indentation, bullet and line ending kept, its label
    made the standard one; a `[F]` gets `reason` after its label); every other byte of the
    file is kept. `expect` lists the markers the task may have now (e.g. only `[P]` before
    `[x]`): another one is a WorkflowError and nothing is written. So is a missing task, an
    unknown marker anywhere in the file, or a task listed twice.
    """
    text = _read_text(path)
    parse_progress(text, source=str(path))  # refuse to edit a file that is already invalid
    lines = _lines(text)
    for number, match, current in _status_lines(text, str(path)):
        if match["id"] != task_id:
            continue
        allowed = None if expect is None else list(expect)
        if allowed is not None and current not in allowed:
            wanted = " or ".join(item.value for item in allowed)
            raise WorkflowError(f"{path}:{number}: {task_id} is {current.value}, expected "
                                f"{wanted} before it becomes {marker.value}")
        new = status_line(task_id, marker, reason if marker is Marker.FAILED else None)
        lines[number - 1] = f"{match['indent']}{match['bullet']}{new[1:]}{match['eol']}"
        atomic_write_bytes(path, "".join(lines).encode("utf-8"))
        return current
    raise WorkflowError(f"{path}: no status line for {task_id}")
