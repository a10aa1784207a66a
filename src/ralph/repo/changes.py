"""Changes to the work tree as clients are told of them (`event/file_changed`): what one
batch of file-system events says happened to each path, which paths git ignores, and the
store frames they are recorded as (stream `repo`; the remote API's events are projections of
them, see `ralph.remote.repo_events`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ralph.git import Git

__all__ = ["FILE_CHANGED", "REPO_STREAM", "STATUS_CHANGED", "Change", "FileChange",
           "check_ignored", "merge_kinds"]

REPO_STREAM = "repo"
FILE_CHANGED = "repo.file_changed"
"""meta {path, change, [old_path]}"""
STATUS_CHANGED = "repo.git_status_changed"
"""meta {branch, staged, unstaged, untracked, [truncated]}"""

Change = Literal["created", "modified", "deleted", "renamed"]
Kind = Literal["added", "modified", "deleted"]


@dataclass(frozen=True)
class FileChange:
    path: str
    change: Change
    old_path: str | None = None

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"path": self.path, "change": self.change}
        if self.old_path is not None:
            meta["old_path"] = self.old_path
        return meta


def merge_kinds(kinds: Collection[Kind], exists: bool) -> Change:
    """What several events of one path in one batch amount to: deleted wins, unless the path
    exists again at the end of the batch (deleted then created: created); created beats a
    modification (made after it: the events of a batch come unordered)."""
    if "deleted" in kinds and not exists:
        return "deleted"
    if "added" in kinds:
        return "created"
    if "deleted" in kinds:  # gone and back already: its creation comes with the next batch
        return "deleted"
    return "modified"


async def check_ignored(git: Git, paths: Sequence[str]) -> set[str]:
    """Which of `paths` (repo-relative; existing or not) git ignores. GitError when git
    fails (not a repository, a path inside a submodule)."""
    return await git.check_ignored(paths)
