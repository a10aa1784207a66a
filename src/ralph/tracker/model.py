"""What a task is, independent of the file format it was read from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypeGuard, get_args

TaskStatus = Literal["open", "done", "in_progress", "blocked"]
TaskKind = Literal["build", "plan", "docs", "hotfix", "review"]

STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
KINDS: tuple[TaskKind, ...] = get_args(TaskKind)

# The kind chooses the prompt file; "build" is the ordinary case, so it has no tag.
_TAG_KINDS: dict[str, TaskKind] = {
    "plan": "plan",
    "docs": "docs",
    "hotfix": "hotfix",
    "review": "review",
}
_TAG = re.compile(r"\[(plan|docs|hotfix|review)\]", re.IGNORECASE)


@dataclass(frozen=True)
class Task:
    """One unit of work from a tracker file.

    `order` is the position in the file, so that ties in priority keep the author's order.
    `blocked_reason` is None unless the task is blocked.
    """

    id: str
    title: str
    status: TaskStatus
    kind: TaskKind
    acceptance: tuple[str, ...]
    depends_on: tuple[str, ...]
    priority: int | None
    order: int
    blocked_reason: str | None


def kind_from_title(title: str) -> TaskKind:
    """The kind named by the first tag in `title` (`[PLAN]`, `[docs]`, ...), else "build"."""
    match = _TAG.search(title)
    return _TAG_KINDS[match.group(1).lower()] if match else "build"


def is_status(value: object) -> TypeGuard[TaskStatus]:
    """Whether `value` is a TaskStatus; callers such as RPC faces pass plain strings."""
    return isinstance(value, str) and value in STATUSES


def is_kind(value: object) -> TypeGuard[TaskKind]:
    return isinstance(value, str) and value in KINDS


def one_line(text: str) -> str:
    """`text` with every run of whitespace made one space: a reason must fit on one line of the
    tracker file, or it would break the file's structure."""
    return " ".join(text.split())
