"""Reading one field of a prd.json story with its type checked, for clear one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ralph.tracker.errors import TrackerError

_PREVIEW = 40


def preview(value: object) -> str:
    """`value` as JSON, cut short: enough to recognise it in an error message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


def is_int(value: object) -> bool:
    # JSON true/false arrive as bool, which Python counts as int; they are not ids or numbers.
    return isinstance(value, int) and not isinstance(value, bool)


class StoryFields:
    """Typed access to a story's fields; every error names the file and the story."""

    def __init__(self, story: dict[str, Any], where: str) -> None:
        self.story = story
        self.where = where

    def error(self, problem: str) -> TrackerError:
        return TrackerError(f"{self.where}: {problem}")

    def pick(self, name: str, alias: str) -> tuple[str, Any]:
        """The field under `name` or its alias (the public loops' camelCase); both is ambiguous."""
        if name in self.story and alias in self.story:
            raise self.error(f"has both '{name}' and '{alias}'; keep one")
        key = alias if alias in self.story else name
        return key, self.story.get(key)

    def typed(self, name: str, check: Callable[[object], bool], expected: str) -> Any:
        """The field's value, None when absent or null, else it must pass `check`."""
        value = self.story.get(name)
        if value is not None and not check(value):
            raise self.error(f"'{name}' must be {expected}, not {preview(value)}")
        return value

    def id_list(self, name: str, alias: str) -> tuple[str, ...]:
        key, value = self.pick(name, alias)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(item, str) or is_int(item) for item in value
        ):
            raise self.error(f"'{key}' must be a list of story ids, not {preview(value)}")
        return tuple(dict.fromkeys(str(item) for item in value))

    def str_list(self, name: str, alias: str) -> tuple[str, ...]:
        key, value = self.pick(name, alias)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(f"'{key}' must be a list of strings, not {preview(value)}")
        return tuple(value)
