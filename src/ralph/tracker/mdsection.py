"""Finding the `## Tasks` section of a markdown PRD: the only part Ralph parses or edits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ralph.tracker.errors import TrackerError
from ralph.tracker.mdlines import content, fence_closed, fence_opened

# Level 1 and 2 ATX headings end the section; `###` subheadings inside it (phases, groups) do
# not, so a long task list can be organised without leaving the section.
_HEADING = re.compile(r" {0,3}(?P<level>#{1,2})[ \t]+(?P<text>.*?)[ \t]*$")
SECTION_TITLE = "tasks"


def no_tasks(path: Path) -> TrackerError:
    return TrackerError(f"{path} has no tasks: add a checklist under '## Tasks'")


@dataclass(frozen=True)
class Section:
    """Lines [start, end) of the file, the body of the `## Tasks` heading."""

    heading: int
    start: int
    end: int


def find_tasks_section(path: Path, lines: list[str]) -> Section:
    """The body of the one `## Tasks` heading (case-insensitive), up to the next `#`/`##`.

    A second `## Tasks` heading is an error rather than silently ignored or merged: either
    choice would surprise the author of one of the two lists.
    """
    headings: list[tuple[int, int, str]] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        body = content(line)
        if fence is not None:
            if fence_closed(fence, body):
                fence = None
            continue
        fence = fence_opened(body)
        if fence is not None:
            continue
        match = _HEADING.match(body)
        if match:
            text = match.group("text").rstrip("#").strip()
            headings.append((index, len(match.group("level")), text))
    tasks = [h for h in headings if h[1] == 2 and h[2].casefold() == SECTION_TITLE]
    if not tasks:
        raise no_tasks(path)
    if len(tasks) > 1:
        raise TrackerError(
            f"{path}:{tasks[1][0] + 1}: a second '## Tasks' heading (the first is on line "
            f"{tasks[0][0] + 1}): keep one task list"
        )
    heading = tasks[0][0]
    end = next((h[0] for h in headings if h[0] > heading), len(lines))
    return Section(heading=heading, start=heading + 1, end=end)
