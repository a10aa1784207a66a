"""Parsing the task checklist of a markdown PRD into tasks, remembering where each one lives.

Layout understood (inside `## Tasks` only):

    - [ ] 1. Title of the task            <- a task: `-`, `*` or `+`, a marker, an optional id
      - an acceptance criterion           <- any bullet indented below the task
      - Depends on: 2, T-3                <- prerequisites (comma or space separated)
      - Blocked: waiting for the API key  <- the reason of a `[-]` task

A checkbox is a task when it is not indented below the current task; one indented below it is
an acceptance criterion (nested checklists are criteria, not tasks). A non-blank line at or left
of the task's indentation ends it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ralph.tracker.errors import TrackerError
from ralph.tracker.fileio import BOM
from ralph.tracker.ids import ID_PATTERN, is_valid_id, slugify
from ralph.tracker.mdlines import (
    content,
    fence_closed,
    fence_opened,
    first_ending,
    indent_width,
    split_lines,
)
from ralph.tracker.mdsection import Section, find_tasks_section, no_tasks
from ralph.tracker.model import Task, TaskStatus, kind_from_title
from ralph.tracker.snapshot import Snapshot
from ralph.tracker.validate import check_dependencies

STATUS_OF_MARK: dict[str, TaskStatus] = {
    " ": "open",
    "x": "done",
    "X": "done",
    "~": "in_progress",
    "-": "blocked",
}

# A task line (inside `## Tasks`, not indented below another task): `- [ ] 1. Title`.
CHECKBOX = re.compile(r"[ \t]*[-*+][ \t]+\[(?P<mark>[^\]])\](?:[ \t]+(?P<rest>.*))?$")
_EXPLICIT_ID = re.compile(rf"(?P<id>{ID_PATTERN.pattern})[.:](?:[ \t]+(?P<title>.*))?$")
_BULLET = re.compile(
    r"(?P<indent>[ \t]*)(?P<marker>[-*+]|\d{1,9}[.)])(?:(?P<gap>[ \t]+)(?P<text>.*))?$"
)
_SUB_CHECKBOX = re.compile(r"\[[ xX~-]\](?:[ \t]+|$)")
_DEPENDS = re.compile(r"depends[ _-]?on[ \t]*:(?P<value>.*)$", re.IGNORECASE)
_BLOCKED = re.compile(r"blocked[ \t]*:(?P<value>.*)$", re.IGNORECASE)
_NO_DEPENDENCIES = {"", "none", "-"}


@dataclass(frozen=True)
class SubBullet:
    """A bullet indented below a task, with its continuation lines: lines [start, end)."""

    start: int
    end: int
    indent: str
    marker: str
    lead: str  # everything before the text: indentation, bullet, spacing
    text: str


@dataclass(frozen=True)
class TaskBlock:
    """A task and the lines it occupies, which is all a rewrite needs to touch it alone."""

    task: Task
    line: int  # 0-based index of the task's checkbox line
    marker_col: int  # index of the marker character in that line
    indent: str
    head_end: int  # index after the checkbox line and its continuation lines
    bullets: tuple[SubBullet, ...]
    blocked: tuple[SubBullet, ...]  # the `Blocked:` bullets among `bullets`


@dataclass(frozen=True)
class ParsedPrd:
    """A markdown PRD: its text and lines (endings kept, BOM removed), where its task list
    is, and its tasks (`snapshot`, in the order of `blocks`)."""

    bom: bool
    body: str
    lines: tuple[str, ...]
    newline: str
    section: Section
    blocks: tuple[TaskBlock, ...]
    snapshot: Snapshot

    def block(self, task_id: str) -> TaskBlock | None:
        position = self.snapshot.positions.get(task_id)
        return None if position is None else self.blocks[position]


@dataclass
class Draft:
    """A task while its lines are being collected."""

    line: int
    indent: int
    indent_text: str
    mark: str
    marker_col: int
    title_parts: list[str]
    head_end: int
    bullets: list[SubBullet] = field(default_factory=list)


def parse_prd(path: Path, text: str) -> ParsedPrd:
    """Parse and validate a PRD; TrackerError names the file and line of the first problem."""
    bom = text.startswith(BOM)
    body = text[len(BOM) :] if bom else text
    lines = split_lines(body)
    section = find_tasks_section(path, lines)
    drafts = collect(lines, section.start, section.end)
    if not drafts:
        raise no_tasks(path)
    blocks = tuple(finish(path, draft, order) for order, draft in enumerate(drafts))
    validate(path, blocks)
    tasks = tuple(block.task for block in blocks)
    return ParsedPrd(bom=bom, body=body, lines=tuple(lines), newline=first_ending(lines),
                     section=section, blocks=blocks, snapshot=Snapshot(tasks, ranked=False))


def validate(path: Path, blocks: tuple[TaskBlock, ...]) -> None:
    """The checks that span tasks: unique ids, known dependencies, no cycle."""
    _check_unique(path, blocks)
    check_dependencies(
        [block.task for block in blocks],
        lambda task: f"{path}:{blocks[task.order].line + 1}",
    )


def collect(lines: Sequence[str], start: int, end: int, *,
            resync: Callable[[int], bool] | None = None) -> list[Draft]:
    """The tasks' drafts in lines [start, end). `resync(index)`, if given, is asked at each
    task line: True stops the collection there (that task and what follows are known)."""
    drafts: list[Draft] = []
    current: Draft | None = None
    # What an indented non-bullet line continues: the task's title, its last bullet, or (after
    # a blank line) nothing: a separate paragraph, kept in the file but not parsed.
    extends: Literal["title", "bullet"] | None = None
    fence: str | None = None
    for index in range(start, end):
        body = content(lines[index])
        if fence is not None:
            if fence_closed(fence, body):
                fence = None
            continue
        if not body.strip():
            extends = None
            continue
        indent = indent_width(body)
        inside = current is not None and indent > current.indent
        fence = fence_opened(body)
        checkbox = CHECKBOX.match(body) if fence is None else None
        if checkbox and not inside:
            if resync is not None and resync(index):
                break
            rest = checkbox.group("rest")
            current = Draft(
                line=index,
                indent=indent,
                indent_text=body[: len(body) - len(body.lstrip(" \t"))],
                mark=checkbox.group("mark"),
                marker_col=checkbox.start("mark"),
                title_parts=[rest.strip()] if rest else [],
                head_end=index + 1,
            )
            drafts.append(current)
            extends = "title"
            continue
        if current is None or not inside:
            current = None
            extends = None
            continue
        bullet = _BULLET.match(body) if fence is None else None
        if bullet:
            current.bullets.append(_sub_bullet(index, body, bullet))
            extends = "bullet"
        elif fence is not None:
            extends = None
        elif extends == "title" and not current.bullets:
            current.title_parts.append(body.strip())
            current.head_end = index + 1
        elif extends == "bullet":
            last = current.bullets[-1]
            current.bullets[-1] = replace(
                last, end=index + 1, text=f"{last.text} {body.strip()}".strip()
            )
    return drafts


def _sub_bullet(index: int, body: str, bullet: re.Match[str]) -> SubBullet:
    text = bullet.group("text") or ""
    lead = body[: bullet.start("text")] if bullet.group("text") is not None else body + " "
    return SubBullet(
        start=index,
        end=index + 1,
        indent=bullet.group("indent"),
        marker=bullet.group("marker"),
        lead=lead,
        text=text.strip(),
    )


def finish(path: Path, draft: Draft, order: int) -> TaskBlock:
    where = f"{path}:{draft.line + 1}"
    status = STATUS_OF_MARK.get(draft.mark)
    if status is None:
        raise TrackerError(
            f"{where}: unknown task marker '[{_visible(draft.mark)}]'; use [ ], [x], [~] or [-]"
        )
    heading = " ".join(draft.title_parts)
    explicit = _EXPLICIT_ID.match(heading)
    task_id = explicit.group("id") if explicit else None
    title = ((explicit.group("title") or "") if explicit else heading).strip()
    if not title:
        raise TrackerError(f"{where}: task has no title")
    if task_id is None:
        task_id = slugify(title)
        if not task_id:
            raise TrackerError(
                f"{where}: cannot make an id from the title '{title}'; give the task an id, "
                f"e.g. '- [ ] 1. {title}'"
            )
    acceptance: list[str] = []
    depends_on: list[str] = []
    blocked: list[SubBullet] = []
    reason: str | None = None
    for bullet in draft.bullets:
        text = _SUB_CHECKBOX.sub("", bullet.text, count=1).strip()
        depends = _DEPENDS.match(text)
        blocked_match = _BLOCKED.match(text)
        if depends:
            for dep in _dependencies(path, bullet, depends):
                if dep not in depends_on:
                    depends_on.append(dep)
        elif blocked_match:
            blocked.append(bullet)
            reason = blocked_match.group("value").strip() or None
        elif text:
            acceptance.append(text)
    task = Task(
        id=task_id,
        title=title,
        status=status,
        kind=kind_from_title(title),
        acceptance=tuple(acceptance),
        depends_on=tuple(depends_on),
        priority=None,
        order=order,
        # A leftover `Blocked:` line under a task that is no longer `[-]` is history, not state.
        blocked_reason=reason if status == "blocked" else None,
    )
    return TaskBlock(
        task=task,
        line=draft.line,
        marker_col=draft.marker_col,
        indent=draft.indent_text,
        head_end=draft.head_end,
        bullets=tuple(draft.bullets),
        blocked=tuple(blocked),
    )


def _visible(mark: str) -> str:
    """A marker as a reader can tell it apart: a tab or an unusual space (which looks like the
    valid `[ ]`) is shown as its code point."""
    return mark if mark.isprintable() and not mark.isspace() else f"U+{ord(mark):04X}"


def _dependencies(path: Path, bullet: SubBullet, match: re.Match[str]) -> list[str]:
    value = match.group("value").strip()
    if value.casefold() in _NO_DEPENDENCIES:
        return []
    found = [token for token in re.split(r"[,\s]+", value) if token]
    for token in found:
        if not is_valid_id(token):
            raise TrackerError(
                f"{path}:{bullet.start + 1}: 'Depends on' lists '{token}', which is not a task "
                "id (ids hold letters, digits, '_' and '-')"
            )
    return found


def _check_unique(path: Path, blocks: tuple[TaskBlock, ...]) -> None:
    seen: dict[str, int] = {}
    for block in blocks:
        first = seen.setdefault(block.task.id, block.line)
        if first != block.line:
            raise TrackerError(
                f"{path}:{block.line + 1}: duplicate task id '{block.task.id}' "
                f"(also on line {first + 1})"
            )
