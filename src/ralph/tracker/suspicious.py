"""Lines of a markdown PRD that look like tasks but are not read as tasks.

The parser (ralph.tracker.mdparse) reads only `- [ ] Title` bullets under `## Tasks`, so a near
miss drops a task without a word: `1. [ ] Title` (a numbered list), `-[ ] Title`, `- [] Title`,
`[ ] Title` (no bullet), a checklist under `## Backlog` or `### Tasks`. This module finds such
lines so that `ralph tasks` and the start of a run can say so.

It reads the file as the parser does: fenced code blocks are examples, and a line indented
below a task is that task's acceptance criterion or text, never a task of its own (outside
`## Tasks` the same holds below a line reported here, so a misplaced checklist is reported
once per item, not once per criterion). Lines inside HTML comments are never reported.
prd.json has no such lines: a story is a JSON object or it is not.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ralph.tracker.factory import MARKDOWN_SUFFIXES
from ralph.tracker.fileio import BOM, read_text
from ralph.tracker.mdlines import content, fence_closed, fence_opened, indent_width, split_lines
from ralph.tracker.mdparse import CHECKBOX, STATUS_OF_MARK
from ralph.tracker.mdsection import SECTION_TITLE

# ATX headings of every level: levels 1 and 2 bound the `## Tasks` section (as in mdsection),
# and any level names where a misplaced line is.
_HEADING = re.compile(r" {0,3}(?P<level>#{1,6})[ \t]+(?P<text>.*?)[ \t]*$")
# Something that starts like a checkbox: an optional block quote and list marker (a bullet or
# `1.`), then a box holding at most one of the marks, spaces around it allowed.
_LOOKALIKE = re.compile(
    r"(?P<lead>\s*)(?P<quote>>[>\s]*)?(?P<marker>[-*+]|\d{1,9}[.)])?(?P<gap>\s*)"
    r"\[(?P<inner>\s*[xX~-]?\s*)\](?P<after>.?)"
)
_COMMENT = re.compile(r"<!--|-->")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SHOWN_CHARS = 60


@dataclass(frozen=True)
class SuspiciousLine:
    """A line that looks like a task but is not read as one."""

    line: int  # 1-based
    text: str  # the line as written, without its ending
    reason: str  # why it is not a task, and how to write it so that it is

    def describe(self, source: str) -> str:
        """One line for a warning: `PRD.md:3: "1. [ ] Title" is not read as a task: why`,
        with control characters shown as `\\xNN` (the file's text must not drive a
        terminal)."""
        shown = self.text.strip()
        if len(shown) > _SHOWN_CHARS:
            shown = shown[: _SHOWN_CHARS - 1] + "…"
        line = f'{source}:{self.line}: "{shown}" is not read as a task: {self.reason}'
        return _CONTROLS.sub(lambda m: " " if m.group() == "\t" else f"\\x{ord(m.group()):02x}",
                             line)


def suspicious_lines(path: Path) -> list[SuspiciousLine]:
    """The lines of the tracker file at `path` that look like tasks but are not read as ones.

    Only markdown files have them: any other format gives []. Raises TrackerError when the
    file cannot be read.
    """
    if path.suffix.lower() not in MARKDOWN_SUFFIXES:
        return []
    return find_suspicious(read_text(path))


def find_suspicious(text: str) -> list[SuspiciousLine]:
    """The lines of a markdown PRD's `text` that look like tasks but are not read as ones."""
    bodies = [content(line) for line in split_lines(text.removeprefix(BOM))]
    headings = dict(_headings(bodies))
    has_section = any(heading.is_task_list for heading in headings.values())
    found: list[SuspiciousLine] = []
    in_section = False
    heading: _Heading | None = None
    current: int | None = None  # the indentation of the task the lines below belong to
    in_comment = False
    for index, body in _outside_fences(bodies):
        commented = in_comment
        for mark in _COMMENT.finditer(body):
            in_comment = mark.group() == "<!--"
        indent = indent_width(body)
        inside = current is not None and indent > current
        here = headings.get(index)
        if here is not None:
            heading = here
            if here.level <= 2:
                in_section = here.is_task_list
                current = None
                continue
        if inside:
            continue  # a criterion, or text of the task above
        current = None
        if fence_opened(body) is not None:
            continue
        task = CHECKBOX.match(body)
        if task is not None and (in_section or task.group("mark") in STATUS_OF_MARK):
            current = indent  # a task, or one that would be under `## Tasks`
            if not in_section and not commented:
                found.append(SuspiciousLine(index + 1, body, _placement(heading, has_section)))
            continue
        near = _LOOKALIKE.match(body)
        if near is None or commented:
            continue
        problems = _shape_problems(near)
        if not in_section:
            problems.append(_placement(heading, has_section))
            current = indent
        problems.append(f"write '- [{near.group('inner').strip() or ' '}] Title'")
        found.append(SuspiciousLine(index + 1, body, "; ".join(problems)))
    return found


@dataclass(frozen=True)
class _Heading:
    level: int
    title: str  # the heading's text, without the `#`s
    written: str  # the heading as written, trimmed

    @property
    def is_task_list(self) -> bool:
        return self.level == 2 and self.title.casefold() == SECTION_TITLE


def _outside_fences(bodies: list[str]) -> Iterator[tuple[int, str]]:
    """(index, text) of every non-blank line outside fenced code blocks (their opening fence
    included, as the parser sees it)."""
    fence: str | None = None
    for index, body in enumerate(bodies):
        if fence is not None:
            if fence_closed(fence, body):
                fence = None
            continue
        if not body.strip():
            continue
        fence = fence_opened(body)
        yield index, body


def _headings(bodies: list[str]) -> Iterator[tuple[int, _Heading]]:
    for index, body in _outside_fences(bodies):
        match = _HEADING.match(body)
        if match:
            title = match.group("text").rstrip("#").strip()
            yield index, _Heading(len(match.group("level")), title, body.strip())


def _placement(heading: _Heading | None, has_section: bool) -> str:
    if heading is not None and heading.title.casefold() == SECTION_TITLE:
        return (f"it is under '{heading.written}', but the task list is the checklist under a "
                "level-2 heading '## Tasks'")
    if not has_section:
        return "the file has no '## Tasks' heading, and only the checklist under it is read"
    where = f"under '{heading.written}'" if heading is not None else "before any heading"
    return f"it is {where}, and only the checklist under '## Tasks' is read"


def _shape_problems(match: re.Match[str]) -> list[str]:
    """What keeps a line shaped like a checkbox from being a task's line."""
    problems: list[str] = []
    lead, marker, gap = match.group("lead"), match.group("marker"), match.group("gap")
    inner, after = match.group("inner"), match.group("after")
    mark = inner.strip()
    if odd := _odd_space(lead):
        problems.append(f"its indentation holds {odd}")
    if match.group("quote"):
        problems.append("it is in a block quote ('>')")
    if marker is None:
        problems.append("the box has no bullet before it")
    elif marker not in "-*+":
        problems.append(f"it is a numbered list item ('{marker}'), not a bullet")
    elif not gap:
        problems.append(f"no space between '{marker}' and the box")
    elif odd := _odd_space(gap):
        problems.append(f"{odd} between '{marker}' and the box")
    if not inner:
        problems.append("the box is empty ('[]')")
    elif inner != (mark or " "):
        problems.append(f"the box is '[{_shown(inner)}]', not '[{mark or ' '}]'")
    if after and not after.isspace():
        problems.append("no space between the box and the title")
    elif odd := _odd_space(after):
        problems.append(f"{odd} after the box")
    return problems


def _odd_space(text: str) -> str | None:
    """The first whitespace character in `text` other than a space or a tab, described."""
    for char in text:
        if char not in " \t":
            name = unicodedata.name(char, "").lower() or "a space character"
            return f"an unusual space (U+{ord(char):04X}, {name})"
    return None


def _shown(text: str) -> str:
    """Whitespace made visible: tabs as `\\t`, other unusual spaces as `U+XXXX`."""
    return "".join(char if char == " " or not char.isspace()
                   else "\\t" if char == "\t" else f"U+{ord(char):04X}" for char in text)
