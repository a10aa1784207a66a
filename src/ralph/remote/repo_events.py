"""The repository watcher's store frames as the remote API's events
(docs/protocols/remote.md): `event/file_changed` and `event/git_status_changed`, each with
the frame's store `seq` (an extension: where a reconnecting client resumes). A projection:
the watcher records (ralph.remote.watcher), the server forwards what is recorded."""

from __future__ import annotations

from typing import Any

from ralph.repo import FILE_CHANGED, REPO_STREAM, STATUS_CHANGED
from ralph.store import Frame

Event = tuple[str, dict[str, Any]]


def repo_events(frame: Frame) -> list[Event]:
    """The events of one frame of the `repo` stream (none for other frames)."""
    if frame.stream != REPO_STREAM:
        return []
    meta = frame.meta
    if frame.topic == FILE_CHANGED:
        params: dict[str, Any] = {"path": meta.get("path"), "change": meta.get("change")}
        if meta.get("old_path") is not None:
            params["old_path"] = meta["old_path"]  # extension: a rename's original path
        params["seq"] = frame.seq
        return [("event/file_changed", params)]
    if frame.topic == STATUS_CHANGED:
        params = {"branch": meta.get("branch"), "staged": meta.get("staged", []),
                  "unstaged": meta.get("unstaged", []), "untracked": meta.get("untracked", [])}
        if meta.get("truncated"):
            params["truncated"] = True  # extension: a list was cut (see the watcher)
        params["seq"] = frame.seq
        return [("event/git_status_changed", params)]
    return []
