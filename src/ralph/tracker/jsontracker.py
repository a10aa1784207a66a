"""The JSON tracker: a prd.json whose stories are the task list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ralph.tracker.errors import TrackerError
from ralph.tracker.fileio import BOM, read_text, write_text
from ralph.tracker.jsonparse import parse_json_prd
from ralph.tracker.model import Task, TaskStatus
from ralph.tracker.protocol import TrackerFormat
from ralph.tracker.status import checked_status, normalized_reason


class JsonTracker:
    """Reads and updates a prd.json; see ralph.tracker.jsonparse for the fields."""

    path: Path
    format: TrackerFormat

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = "json"

    def load(self) -> list[Task]:
        return list(parse_json_prd(self.path, read_text(self.path)).tasks)

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        checked = checked_status(self.path, task_id, status)
        prd = parse_json_prd(self.path, read_text(self.path))
        index = prd.index_of(task_id)
        if index is None:
            raise TrackerError(f"{self.path}: no story with id '{task_id}'")
        update_story(prd.stories[index], checked, normalized_reason(reason))
        text = json.dumps(prd.data, indent=2, ensure_ascii=False) + "\n"
        text = (BOM if prd.bom else "") + text
        write_text(self.path, text)
        # Read back from the new text, so the caller sees exactly what the file now says.
        return parse_json_prd(self.path, text).tasks[index]


def update_story(story: dict[str, Any], status: TaskStatus, reason: str | None) -> None:
    """Set the fields that carry `status`, in place, touching no other key.

    `passes` is always written (the public loops read it). `blocked` and `status` are only
    added when they carry information (blocked, in_progress) and otherwise only updated when
    already present, so a plain prd.json does not grow Ralph-only keys.
    """
    story["passes"] = status == "done"
    if status == "blocked":
        story["blocked"] = True
        if reason is not None:
            story["blocked_reason"] = reason
    else:
        if "blocked" in story:
            story["blocked"] = False
        story.pop("blocked_reason", None)
    if status == "in_progress" or "status" in story:
        story["status"] = status
