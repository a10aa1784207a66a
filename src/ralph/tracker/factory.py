"""Choosing the tracker implementation for a file."""

from __future__ import annotations

from pathlib import Path

from ralph.tracker.errors import TrackerError
from ralph.tracker.jsontracker import JsonTracker
from ralph.tracker.markdown import MarkdownTracker
from ralph.tracker.protocol import Tracker

MARKDOWN_SUFFIXES = (".md", ".markdown")
JSON_SUFFIXES = (".json",)


def open_tracker(path: Path) -> Tracker:
    """The tracker for `path`, by its suffix (case-insensitive): markdown or JSON.

    The file must exist: a missing PRD is a setup mistake (`ralph init` creates one) that
    should be reported before any agent starts, not discovered at the first load.
    """
    suffix = path.suffix.lower()
    tracker: Tracker
    if suffix in MARKDOWN_SUFFIXES:
        tracker = MarkdownTracker(path)
    elif suffix in JSON_SUFFIXES:
        tracker = JsonTracker(path)
    else:
        raise TrackerError(
            f"{path}: unknown tracker format '{path.suffix}'; use a .md, .markdown or .json file"
        )
    if not path.exists():
        raise TrackerError(f"{path}: no such file")
    if not path.is_file():
        raise TrackerError(f"{path}: is not a file")
    return tracker
