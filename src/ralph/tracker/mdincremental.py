"""Parsing a new version of a markdown PRD from the previous one: only what changed.

An agent ticks a box; Ralph marks a task blocked. Parsing 10,000 tasks again for that would
make every iteration cost time in proportion to the PRD. Instead the new text is compared
with the old (common start and end, at C speed), the lines between are parsed again from
the task before them, and parsing stops at the first task line after them that the old
version had as a task too: from there on the file is the same, and so are its tasks (moved
by as many lines as were added or removed). Changes that could move the task list itself (a
heading or a code fence in the changed lines, a lone carriage return) parse everything.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import replace
from pathlib import Path

from ralph.tracker.fileio import BOM
from ralph.tracker.mdlines import first_ending, split_lines
from ralph.tracker.mdparse import ParsedPrd, SubBullet, TaskBlock, collect, finish, parse_prd
from ralph.tracker.mdparse import validate as validate_blocks
from ralph.tracker.mdsection import Section, no_tasks
from ralph.tracker.snapshot import Snapshot, marks_of
from ralph.tracker.textdiff import common_affixes

# Lines that can end the task list or hide lines from it: `#`/`##` headings, code fences.
# Any whitespace before a fence: a fence is closed by a line that is the fence once stripped.
_STRUCTURE = re.compile(r"^(?: {0,3}#{1,2}[ \t]|[^\S\n]*(?:`{3,}|~{3,}))", re.MULTILINE)


def reparse_prd(path: Path, old: ParsedPrd, text: str) -> ParsedPrd:
    """`text` parsed and validated, as parse_prd would, reusing what `old` parsed."""
    bom = text.startswith(BOM)
    body = text[len(BOM):] if bom else text
    if body == old.body and bom == old.bom:
        return old
    if bom != old.bom or _lone_cr(body) or _lone_cr(old.body):
        return parse_prd(path, text)
    prefix, suffix = common_affixes(old.body, body)
    start = old.body.rfind("\n", 0, prefix) + 1  # the first changed line's offset, both texts
    old_region = old.body[start:_line_end(old.body, len(old.body) - suffix)]
    new_region = body[start:_line_end(body, len(body) - suffix)]
    if _STRUCTURE.search(old_region) or _STRUCTURE.search(new_region):
        return parse_prd(path, text)
    first = old.body.count("\n", 0, start)
    removed = len(split_lines(old_region))
    added = split_lines(new_region)
    delta = len(added) - removed
    lines = old.lines[:first] + tuple(added) + old.lines[first + removed:]
    section = old.section
    if first + removed <= section.heading:  # all before the task list: it only moves
        moved = Section(section.heading + delta, section.start + delta, section.end + delta)
        return _rebuilt(old, body, lines, moved, 0, 0, [], delta, path)
    runs_to_end = section.end >= len(old.lines)
    if first >= section.end and not runs_to_end:  # after the task list: nothing moves
        return _rebuilt(old, body, lines, section, 0, 0, [], 0, path)
    end = len(lines) if runs_to_end else section.end + delta
    section = Section(section.heading, section.start, end)
    blocks = old.blocks
    # Parse again from the task before the changed lines (from the one before that if the
    # change starts on a task's own line: that line may now belong to the task above).
    restart = bisect_right(blocks, first, key=_line) - 1
    if restart > 0 and blocks[restart].line == first:
        restart -= 1
    from_line = blocks[restart].line if restart >= 0 else section.start
    restart = max(restart, 0)
    past = first + len(added)  # new lines from here on are the old ones from first + removed
    resumed = len(blocks)

    def known_from_here(index: int) -> bool:
        nonlocal resumed
        if index < past:
            return False
        at = bisect_left(blocks, index - delta, key=_line)
        if at < len(blocks) and blocks[at].line == index - delta:
            resumed = at
            return True
        return False

    drafts = collect(lines, from_line, end, resync=known_from_here)
    fresh = [finish(path, draft, restart + n) for n, draft in enumerate(drafts)]
    return _rebuilt(old, body, lines, section, restart, resumed, fresh, delta, path)


def _rebuilt(old: ParsedPrd, body: str, lines: tuple[str, ...], section: Section,
             start: int, stop: int, fresh: list[TaskBlock], delta: int,
             path: Path) -> ParsedPrd:
    """`old` with its blocks [start, stop) replaced by `fresh` and the later ones moved by
    `delta` lines (and renumbered if the number of tasks changed)."""
    shift = start + len(fresh) - stop
    tail = old.blocks[stop:]
    if delta or shift:
        tail = tuple(_moved(block, delta, shift) for block in tail)
    blocks = old.blocks[:start] + tuple(fresh) + tail
    if not blocks:
        raise no_tasks(path)
    before = old.blocks[start:stop]
    same_ids = shift == 0 and all(
        a.task.id == b.task.id and a.task.depends_on == b.task.depends_on
        for a, b in zip(before, fresh, strict=True))
    if not same_ids:
        validate_blocks(path, blocks)
    # The tasks after the change are the old ones unless they were renumbered.
    later = (tuple(block.task for block in tail) if shift
             else old.snapshot.tasks[stop:])
    tasks = old.snapshot.tasks[:start] + tuple(block.task for block in fresh) + later
    marks = old.snapshot.marks[:start] + marks_of([b.task for b in fresh]) + (
        old.snapshot.marks[stop:])
    snapshot = Snapshot(tasks, marks=marks, index=old.snapshot.positions if same_ids else None,
                        ranked=False)  # a markdown task has no priority
    return ParsedPrd(bom=old.bom, body=body, lines=lines, newline=first_ending(lines),
                     section=section, blocks=blocks, snapshot=snapshot)


def _moved(block: TaskBlock, delta: int, shift: int) -> TaskBlock:
    task = replace(block.task, order=block.task.order + shift) if shift else block.task
    if not delta:
        return replace(block, task=task)
    bullets = tuple(_moved_bullet(b, delta) for b in block.bullets)
    blocked = tuple(_moved_bullet(b, delta) for b in block.blocked)
    return replace(block, task=task, line=block.line + delta, head_end=block.head_end + delta,
                   bullets=bullets, blocked=blocked)


def _moved_bullet(bullet: SubBullet, delta: int) -> SubBullet:
    return replace(bullet, start=bullet.start + delta, end=bullet.end + delta)


def _line(block: TaskBlock) -> int:
    return block.line


def _line_end(text: str, at: int) -> int:
    """The offset just past the line holding offset `at` (the text's end for its last line)."""
    newline = text.find("\n", at)
    return len(text) if newline < 0 else newline + 1


def _lone_cr(text: str) -> bool:
    """Whether a line ends in a lone carriage return (line numbers then need a full parse)."""
    return "\r" in text and text.count("\r") != text.count("\r\n")
