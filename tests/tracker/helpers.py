"""Helpers for the tracker tests: writing files byte for byte, and diffing them by line."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from ralph.tracker import Task, TaskKind, TaskStatus


def write(path: Path, text: str) -> Path:
    """Write `text` exactly (no newline translation), so tests control every byte."""
    path.write_bytes(text.encode("utf-8"))
    return path


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def lines_of(text: str) -> list[str]:
    """Lines with their endings (\\r\\n or \\n), split after each \\n."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def changes(before: str, after: str) -> list[tuple[int, list[str], list[str]]]:
    """Every place the two texts differ: (1-based line in `before`, old lines, new lines)."""
    old = lines_of(before)
    new = lines_of(after)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return [
        (i1 + 1, old[i1:i2], new[j1:j2])
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def make_task(
    task_id: str,
    status: TaskStatus = "open",
    *,
    order: int = 0,
    priority: int | None = None,
    depends_on: tuple[str, ...] = (),
    kind: TaskKind = "build",
    blocked_reason: str | None = None,
) -> Task:
    return Task(
        id=task_id,
        title=f"Task {task_id}",
        status=status,
        kind=kind,
        acceptance=(),
        depends_on=depends_on,
        priority=priority,
        order=order,
        blocked_reason=blocked_reason,
    )
