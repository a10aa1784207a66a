"""Parsing prd.json, the format of the public Ralph loops, into tasks.

    {"stories": [{"id": "US-1", "title": "...", "priority": 1, "acceptance": ["..."],
                  "passes": false, "depends_on": ["US-0"]}]}

Also accepted: `userStories` for `stories`, `acceptanceCriteria` for `acceptance`, `dependsOn`
for `depends_on`, integer ids; and Ralph's own optional fields `status` ("in_progress"),
`blocked`, `blocked_reason` and `kind`. Every other key is kept untouched on rewrite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.tracker.errors import TrackerError
from ralph.tracker.fileio import BOM
from ralph.tracker.ids import is_valid_id
from ralph.tracker.jsonfields import StoryFields, is_int, preview
from ralph.tracker.model import Task, TaskKind, TaskStatus, is_kind, is_status, kind_from_title
from ralph.tracker.validate import check_dependencies

STORIES_KEYS = ("stories", "userStories")


@dataclass(frozen=True)
class JsonPrd:
    """The parsed document (to be edited in place and dumped again) and its tasks."""

    bom: bool
    data: dict[str, Any]
    stories: list[dict[str, Any]]
    tasks: tuple[Task, ...]

    def index_of(self, task_id: str) -> int | None:
        return next((t.order for t in self.tasks if t.id == task_id), None)


def parse_json_prd(path: Path, text: str) -> JsonPrd:
    bom = text.startswith(BOM)
    try:
        data = json.loads(text[len(BOM) :] if bom else text)
    except json.JSONDecodeError as exc:
        raise TrackerError(
            f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
        ) from None
    key, stories = _stories(path, data)
    tasks: list[Task] = []
    first_index: dict[str, int] = {}
    for index, story in enumerate(stories):
        task = _task(path, f"{key}[{index}]", index, story)
        first = first_index.setdefault(task.id, index)
        if first != index:
            raise TrackerError(
                f"{path}: story '{task.id}' ({key}[{index}]) has the same id as {key}[{first}]"
            )
        tasks.append(task)
    check_dependencies(tasks, lambda task: f"{path}: story '{task.id}'")
    return JsonPrd(bom=bom, data=data, stories=stories, tasks=tuple(tasks))


def _stories(path: Path, data: object) -> tuple[str, list[dict[str, Any]]]:
    """The key holding the stories and the list itself (checked to hold only objects)."""
    if not isinstance(data, dict):
        raise TrackerError(f"{path}: expected a JSON object with a 'stories' list")
    present = [key for key in STORIES_KEYS if key in data]
    if len(present) > 1:
        raise TrackerError(f"{path}: has both 'stories' and 'userStories'; keep one")
    if not present or not isinstance(data[present[0]], list):
        raise TrackerError(f"{path}: expected a JSON object with a 'stories' list")
    key = present[0]
    stories: list[Any] = data[key]
    if not stories:
        raise TrackerError(f"{path} has no tasks: add a story to '{key}'")
    for index, story in enumerate(stories):
        if not isinstance(story, dict):
            raise TrackerError(f"{path}: {key}[{index}] is not an object: {preview(story)}")
    return key, stories


def _story_id(path: Path, label: str, story: dict[str, Any]) -> str:
    raw = story.get("id")
    if raw is None:
        raise TrackerError(f"{path}: {label} has no 'id'")
    if not (isinstance(raw, str) or is_int(raw)):
        raise TrackerError(
            f"{path}: {label}: 'id' must be a string or an integer, not {preview(raw)}"
        )
    story_id = str(raw)
    if not is_valid_id(story_id):
        raise TrackerError(
            f"{path}: {label}: id {preview(raw)} may hold only letters, digits, '_' and '-'"
        )
    return story_id


def _task(path: Path, label: str, index: int, story: dict[str, Any]) -> Task:
    """The task of one story; `label` ("stories[3]") names it until its id is known."""
    story_id = _story_id(path, label, story)
    fields = StoryFields(story, f"{path}: story '{story_id}'")
    title = fields.typed("title", lambda v: isinstance(v, str), "a string")
    if title is None or not title.strip():
        raise fields.error("has no 'title'")
    priority = fields.typed("priority", is_int, "an integer")
    passes = fields.typed("passes", lambda v: isinstance(v, bool), "true or false")
    blocked = fields.typed("blocked", lambda v: isinstance(v, bool), "true or false")
    reason = fields.typed("blocked_reason", lambda v: isinstance(v, str), "a string")
    status_field = fields.typed("status", is_status, "one of open, done, in_progress, blocked")
    kind_field = fields.typed("kind", is_kind, "one of build, plan, docs, hotfix, review")
    status: TaskStatus
    if blocked:
        status = "blocked"
    elif passes:
        status = "done"
    elif status_field == "in_progress":
        status = "in_progress"
    else:
        status = "open"
    kind: TaskKind = kind_field if kind_field is not None else kind_from_title(title)
    return Task(
        id=story_id,
        title=title.strip(),
        status=status,
        kind=kind,
        acceptance=fields.str_list("acceptance", "acceptanceCriteria"),
        depends_on=fields.id_list("depends_on", "dependsOn"),
        priority=priority,
        order=index,
        blocked_reason=(reason or None) if status == "blocked" else None,
    )
