"""The JSON tracker: a prd.json whose stories are the task list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ralph.tracker.errors import TrackerError
from ralph.tracker.filecache import FileCache
from ralph.tracker.fileio import BOM, write_text
from ralph.tracker.jsonparse import parse_json_prd
from ralph.tracker.model import Task, TaskStatus
from ralph.tracker.protocol import TrackerFormat
from ralph.tracker.snapshot import Snapshot
from ralph.tracker.status import checked_status, normalized_reason


class JsonTracker:
    """Reads and updates a prd.json; see ralph.tracker.jsonparse for the fields.

    The last parse is kept while the file's signature shows no change (ralph.tracker
    .filecache); a changed file is parsed whole (JSON has no cheap partial parse).
    """

    path: Path
    format: TrackerFormat

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = "json"
        self.file = FileCache(path)
        self.parses = 0  # parses done (tests count them, not time)
        self._snapshot: Snapshot | None = None
        self._failed: TrackerError | None = None  # why the cached version cannot be parsed

    def snapshot(self) -> Snapshot:
        version, changed = self.file.current()
        if not changed and self._failed is not None:
            raise self._failed  # the same broken file: the same error, without parsing again
        if changed or self._snapshot is None:
            try:
                self._snapshot = self._parse(version.text)
                self._failed = None
            except TrackerError as exc:
                self._snapshot, self._failed = None, exc
                raise
        return self._snapshot

    def load(self) -> list[Task]:
        return list(self.snapshot())

    def text(self) -> str:
        return self.file.text()

    def _parse(self, text: str) -> Snapshot:
        self.parses += 1
        return Snapshot(parse_json_prd(self.path, text).tasks)

    def set_status(self, task_id: str, status: TaskStatus, reason: str | None = None) -> Task:
        checked = checked_status(self.path, task_id, status)
        self.snapshot()  # the file as it is now, or its error (kept as the cache's)
        assert self.file.version is not None
        # Parsed afresh: the edit below changes the parsed document in place.
        prd = parse_json_prd(self.path, self.file.version.text)
        index = prd.index_of(task_id)
        if index is None:
            raise TrackerError(f"{self.path}: no story with id '{task_id}'")
        update_story(prd.stories[index], checked, normalized_reason(reason))
        text = json.dumps(prd.data, indent=2, ensure_ascii=False) + "\n"
        text = (BOM if prd.bom else "") + text
        updated = self._parse(text)  # read back: the caller sees what the file now says
        write_text(self.path, text)
        self.file.remember(text)
        self._snapshot = updated
        return updated[index]


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
