"""Task reports: the executor's PART 1 and the reviewer's PART 2 with its Status.

The executor writes `## PART 1: IMPLEMENTATION REPORT` and usually leaves a PART 2
placeholder; the reviewer appends its own `## PART 2: REVIEW REPORT` whose Recommendation has
`**Status**: Qualified | Failed`. A report therefore often has two PART 2 headings: the one
that counts is the LAST, and within it the LAST `**Status**:` line. Only level-2 headings
naming the part (`## PART 1: IMPLEMENTATION ...`, `## PART 2: REVIEW ...`, any case) are
parts: a `#### Part 2: the CLI` inside PART 1 is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_PART_RE = re.compile(r"##\s*PART\s*(?:(?P<one>1)\s*:\s*IMPLEMENTATION|(?P<two>2)\s*:\s*REVIEW)"
                      r"\b.*", re.IGNORECASE)
_STATUS_RE = re.compile(r"\s*(?:[-*]\s+)?\*\*Status:?\*\*\s*:?\s*(?P<value>.*)", re.IGNORECASE)
# "Not qualified", "unqualified" are verdicts of failure, not of qualification.
_VERDICT_RE = re.compile(r"\b(?P<negated>not[\s-]+|un)?(?P<word>qualified|failed)\b",
                         re.IGNORECASE)
# A template's choice left unfilled: no verdict at all.
_TEMPLATE_RE = re.compile(r"\bqualified\s*[|/]\s*failed\b|\bfailed\s*[|/]\s*qualified\b",
                          re.IGNORECASE)
_SEPARATOR_RE = re.compile(r"(?:\s*\n)?(?:-{3,}|\*{3,}|_{3,})\s*\Z")


class Verdict(StrEnum):
    """A review's verdict (the reviewer output's `verdict` values)."""

    QUALIFIED = "Qualified"
    FAILED = "Failed"


@dataclass(frozen=True)
class Report:
    """What the orchestrator reads from a report.

    `head` is the text before the first PART 2 heading (title and PART 1) without its
    trailing separator lines and blank lines, line endings as `\n`: the part a reviewer
    must leave as it is. `status` is the verdict of the last PART 2's last Status line: its
    first verdict word, "not qualified" / "unqualified" being Failed; None when there is no
    PART 2, no Status line in it, no verdict word, or a template's "Qualified | Failed"
    left unfilled.
    """

    has_part1: bool
    part2_count: int
    head: str
    last_part2: str | None
    status_text: str | None
    status: Verdict | None


def parse_report(text: str) -> Report:
    """The PART 1 / PART 2 structure and verdict of a report's text (never raises)."""
    # CRLF and LF are the same report: an editor's line endings are no change to PART 1.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.splitlines(keepends=True)
    has_part1 = False
    part2_starts: list[int] = []
    in_fence = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        heading = None if in_fence else _PART_RE.fullmatch(line.strip())
        if heading is None:
            continue
        if heading["one"]:
            has_part1 = True
        else:
            part2_starts.append(index)
    if not part2_starts:
        return Report(has_part1, 0, _head(text), None, None, None)
    last = lines[part2_starts[-1]:]
    status_text = _last_status(last)
    return Report(has_part1, len(part2_starts), _head("".join(lines[:part2_starts[0]])),
                  "".join(last), status_text, _verdict(status_text))


def _head(text: str) -> str:
    """`text` without the `---` lines (and blanks) that end it (they lead into PART 2)."""
    head = text.rstrip()
    while True:
        stripped = _SEPARATOR_RE.sub("", head).rstrip()
        if stripped == head:
            return head
        head = stripped


def _last_status(lines: list[str]) -> str | None:
    found: str | None = None
    in_fence = False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        match = None if in_fence else _STATUS_RE.fullmatch(line.rstrip("\r\n"))
        if match is not None:
            found = match["value"].strip()
    return found


def _verdict(status_text: str | None) -> Verdict | None:
    if status_text is None or _TEMPLATE_RE.search(status_text):
        return None
    first = _VERDICT_RE.search(status_text)
    if first is None:
        return None
    if first["negated"] or first["word"].lower() == "failed":
        return Verdict.FAILED
    return Verdict.QUALIFIED
