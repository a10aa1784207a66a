"""The repository service's errors: a path it will not read, git failing."""

from __future__ import annotations

from ralph.errors import RalphError

__all__ = ["FileNotFound", "RepoError", "RepoGitError"]


class RepoError(RalphError):
    """Reading the repository for a client failed."""


class FileNotFound(RepoError):
    """`path` names no regular file (or, for a diff, no place) inside the repository that may
    be read: missing, a directory, a FIFO or a device, outside the repository (`..`, an
    absolute path, a symlink leading out), in `.git/`, empty, holding a NUL. Clients are told
    all of these alike; `reason` (the message) is for logs."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path!r}: {reason}")
        self.path = path
        self.reason = reason


class RepoGitError(RepoError):
    """Git could not answer: not a repository, git failing or timing out (`reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
