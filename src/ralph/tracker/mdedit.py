"""Changing one task's status in a markdown PRD while leaving every other byte alone.

The PRD is written by people and agents; a rewrite that reformatted it would turn every status
change into a noisy diff and could destroy their notes. So the edit is surgical: one marker
character, plus adding, replacing or removing that task's `Blocked:` bullet.
"""

from __future__ import annotations

from ralph.tracker.fileio import BOM
from ralph.tracker.mdlines import content, ending
from ralph.tracker.mdparse import STATUS_OF_MARK, ParsedPrd, SubBullet, TaskBlock
from ralph.tracker.model import TaskStatus

MARK_OF_STATUS: dict[TaskStatus, str] = {
    "open": " ",
    "done": "x",
    "in_progress": "~",
    "blocked": "-",
}
DEFAULT_SUB_INDENT = "  "

# (start, end, replacement lines): lines [start, end) become the replacement.
_Edit = tuple[int, int, list[str]]


def rewrite(parsed: ParsedPrd, block: TaskBlock, status: TaskStatus, reason: str | None) -> str:
    """The PRD's text with `block`'s task set to `status`.

    For "blocked", `reason` (one line) replaces the task's `Blocked:` bullet or is added after
    its last bullet; None keeps whatever reason is there. Any other status removes the bullet.
    """
    lines = list(parsed.lines)
    line = lines[block.line]
    if STATUS_OF_MARK[line[block.marker_col]] != status:
        col = block.marker_col
        lines[block.line] = line[:col] + MARK_OF_STATUS[status] + line[col + 1 :]
    edits: list[_Edit] = []
    if status != "blocked":
        edits = [(b.start, b.end, []) for b in block.blocked]
    elif reason is not None and block.blocked:
        first, *extra = block.blocked
        eol = ending(lines[first.end - 1])
        edits = [(first.start, first.end, [f"{first.lead}Blocked: {reason}{eol}"])]
        edits += [(b.start, b.end, []) for b in extra]
    elif reason is not None:
        edits = [_insertion(parsed, lines, block, reason)]
    for start, end, replacement in sorted(edits, reverse=True):
        _apply(lines, start, end, replacement)
    return (BOM if parsed.bom else "") + "".join(lines)


def _insertion(parsed: ParsedPrd, lines: list[str], block: TaskBlock, reason: str) -> _Edit:
    """A new `Blocked:` bullet after the task's last bullet, indented like its bullets."""
    at = block.bullets[-1].end if block.bullets else block.head_end
    previous = lines[at - 1]
    eol = ending(previous)
    if not eol:
        # The task ends the file without a final newline: the new bullet becomes the
        # unterminated last line instead, so the file still has no final newline.
        lines[at - 1] = previous + parsed.newline
    return (at, at, [f"{_lead(block)}Blocked: {reason}{eol}"])


def _lead(block: TaskBlock) -> str:
    """The start of a new sub-bullet: like the task's first sub-bullet, else two spaces in."""
    if block.bullets:
        first: SubBullet = block.bullets[0]
        marker = first.marker if first.marker in ("-", "*", "+") else "-"
        return f"{first.indent}{marker} "
    return f"{block.indent}{DEFAULT_SUB_INDENT}- "


def _apply(lines: list[str], start: int, end: int, replacement: list[str]) -> None:
    removes_unterminated_end = (
        not replacement and end == len(lines) and start > 0 and not ending(lines[end - 1])
    )
    lines[start:end] = replacement
    if removes_unterminated_end:
        # The removed bullet was the file's unterminated last line: keep "no final newline".
        lines[start - 1] = content(lines[start - 1])
