"""Reading the repository for clients (the remote API's `git/status`, `git/diff`,
`file/get` and the watcher's events): a service over `ralph.git`, confined to the
repository (no path outside it, nothing of `.git/`)."""

from ralph.repo.changes import (
    FILE_CHANGED,
    REPO_STREAM,
    STATUS_CHANGED,
    Change,
    FileChange,
    check_ignored,
    merge_kinds,
)
from ralph.repo.diff import MAX_DIFF_BYTES, FileDiff, working_diff
from ralph.repo.errors import FileNotFound, RepoError, RepoGitError
from ralph.repo.files import MAX_FILE_BYTES, FileContent, get_file, read_file
from ralph.repo.paths import GIT_DIR, RALPH_DIR, confine, display_path
from ralph.repo.status import GitStatus, git_status

__all__ = [
    "FILE_CHANGED",
    "GIT_DIR",
    "MAX_DIFF_BYTES",
    "MAX_FILE_BYTES",
    "RALPH_DIR",
    "REPO_STREAM",
    "STATUS_CHANGED",
    "Change",
    "FileChange",
    "FileContent",
    "FileDiff",
    "FileNotFound",
    "GitStatus",
    "RepoError",
    "RepoGitError",
    "check_ignored",
    "confine",
    "display_path",
    "get_file",
    "git_status",
    "merge_kinds",
    "read_file",
    "working_diff",
]
