"""The remote API's repository methods (`git/status`, `git/diff`, `file/get`): translations
to ralph.repo, confined to the repository, with the document's error codes (-32010 "File not
found" with `data.path`, -32011 "Git error" with `data.reason`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ralph.git import Git
from ralph.remote.clients import take_big_read
from ralph.repo import (
    FileNotFound,
    RepoError,
    display_path,
    get_file,
    git_status,
    working_diff,
)
from ralph.rpc import Registry, RpcError

FILE_NOT_FOUND = -32010
GIT_ERROR = -32011
ERRORS = {
    "status": [(GIT_ERROR, "Git error")],
    "diff": [(FILE_NOT_FOUND, "File not found"), (GIT_ERROR, "Git error")],
    "get": [(FILE_NOT_FOUND, "File not found")],
}
GIT_TIMEOUT_S = 30


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class GitStatusResult(BaseModel):
    branch: str
    staged: list[str]
    unstaged: list[str]
    untracked: list[str]
    is_clean: bool


class GitDiffParams(_Params):
    path: str | None = None  # None: every change


class GitDiffResult(BaseModel):
    path: str  # as asked; "" when no path was given
    diff: str
    truncated: bool  # extension: the diff was cut at 10 MiB


class FileGetParams(_Params):
    path: str


class FileGetResult(BaseModel):
    path: str
    content: str
    size: int
    truncated: bool
    encoding: Literal["utf-8", "base64"]


def rpc_error(exc: RepoError) -> RpcError:
    """The document's error for a failure of the repository service."""
    if isinstance(exc, FileNotFound):
        return RpcError(FILE_NOT_FOUND, "File not found", {"path": display_path(exc.path)})
    return RpcError(GIT_ERROR, "Git error", {"reason": display_path(str(exc))})


def register(registry: Registry, root: Path) -> None:
    """Add git/status, git/diff and file/get on the repository at `root`."""
    git = Git(root, timeout_s=GIT_TIMEOUT_S)

    @registry.method("git/status", result=GitStatusResult, errors=ERRORS["status"],
                     summary="The branch and the staged, unstaged and untracked paths.")
    async def status() -> GitStatusResult:
        try:
            found = await git_status(root, git=git)
        except RepoError as exc:
            raise rpc_error(exc) from None
        return GitStatusResult(branch=found.branch, staged=list(found.staged),
                               unstaged=list(found.unstaged), untracked=list(found.untracked),
                               is_clean=found.is_clean)

    @registry.method("git/diff", params=GitDiffParams, result=GitDiffResult,
                     errors=ERRORS["diff"],
                     summary="The diff of the work tree against HEAD: one path, or every "
                             "change.")
    async def diff(params: GitDiffParams) -> GitDiffResult:
        take_big_read()
        try:
            found = await working_diff(root, params.path, git=git)
        except RepoError as exc:
            raise rpc_error(exc) from None
        return GitDiffResult(path=display_path(found.path), diff=found.diff,
                             truncated=found.truncated)

    @registry.method("file/get", params=FileGetParams, result=FileGetResult,
                     errors=ERRORS["get"],
                     summary="A file's content (the first 10 MiB): text, or base64.")
    async def file_get(params: FileGetParams) -> FileGetResult:
        take_big_read()
        try:
            found = await get_file(root, params.path)
        except RepoError as exc:
            raise rpc_error(exc) from None
        return FileGetResult(path=display_path(found.path), content=found.content,
                             size=found.size, truncated=found.truncated,
                             encoding=found.encoding)
