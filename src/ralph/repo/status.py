"""The work tree's git status as clients see it (`git/status`, `event/git_status_changed`):
the branch and the staged, unstaged and untracked paths, Ralph's own `.ralph/` left out.

Built from one `Git.snapshot` (`git status --porcelain=v2 --branch -z
--untracked-files=all`). A rename or copy is its new path (the snapshot adds the original as
a deletion of its own right after it: left out here); a path both staged and changed again
is in both lists; a conflicted path (unmerged) is unstaged only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.git import Git, GitError, WorkTree
from ralph.repo.errors import RepoGitError
from ralph.repo.paths import RALPH_DIR, display_path

__all__ = ["GitStatus", "git_failure", "git_status", "status_of"]

_UNMERGED = frozenset({"DD", "AA"})


@dataclass(frozen=True)
class GitStatus:
    """`branch`: the current branch (an unborn one too), or the short commit id of a
    detached HEAD. Paths are repo-relative, in git's order."""

    branch: str
    staged: tuple[str, ...]
    unstaged: tuple[str, ...]
    untracked: tuple[str, ...]

    @property
    def is_clean(self) -> bool:
        return not (self.staged or self.unstaged or self.untracked)

    def payload(self, *, limit: int | None = None) -> dict[str, Any]:
        """{branch, staged, unstaged, untracked} (`event/git_status_changed`); with `limit`,
        at most that many paths per list, and `truncated: true` when some were left out."""
        lists = {"staged": self.staged, "unstaged": self.unstaged,
                 "untracked": self.untracked}
        payload: dict[str, Any] = {"branch": self.branch}
        cut = False
        for name, paths in lists.items():
            if limit is not None and len(paths) > limit:
                cut = True
            payload[name] = list(paths[:limit])
        if cut:
            payload["truncated"] = True
        return payload


async def git_status(root: Path, *, git: Git | None = None) -> GitStatus:
    """The status of the work tree at `root`; RepoGitError when `root` is not in a git
    repository or git fails."""
    git = git or Git(root)
    await require_top(git)
    try:
        tree = await git.snapshot(exclude=[RALPH_DIR], untracked="all")
    except GitError as exc:
        raise await git_failure(git, exc) from None
    return status_of(tree)


def status_of(tree: WorkTree) -> GitStatus:
    staged: dict[str, None] = {}
    unstaged: dict[str, None] = {}
    untracked: dict[str, None] = {}
    changes = tree.changes
    index = 0
    while index < len(changes):
        code, path = changes[index]
        index += 1
        # a rename's or copy's original path: added by the snapshot as a deletion of its own
        if ("R" in code or "C" in code) and index < len(changes) and changes[index][0] == "D ":
            index += 1
        if path == RALPH_DIR or path.startswith(RALPH_DIR + "/"):
            continue
        shown = display_path(path)
        if code == "??":
            untracked[shown] = None
        elif "U" in code or code in _UNMERGED:
            unstaged[shown] = None
        else:
            if code[0] != " ":
                staged[shown] = None
            if code[1] != " ":
                unstaged[shown] = None
    if tree.branch is not None:
        branch = display_path(tree.branch)
    else:
        branch = tree.head[:7] if tree.head else "HEAD"
    return GitStatus(branch, tuple(staged), tuple(unstaged), tuple(untracked))


async def require_top(git: Git) -> None:
    """RepoGitError unless the project's root is the top of its git repository (its `.git`
    there): paths are the project's, and a project inside a larger repository must not
    show the rest of it."""
    if (git.root / ".git").exists():
        return
    try:
        inside = await git.is_repo()
    except GitError:
        inside = False
    raise RepoGitError(f"the project is not the top of its git repository: {git.root}"
                       if inside else f"not a git repository: {git.root}")


async def git_failure(git: Git, exc: GitError) -> RepoGitError:
    """What a failed git call tells a client: that this is no repository, else git's
    reason."""
    try:
        repository = await git.is_repo()
    except GitError:
        repository = True  # git cannot even run: its own error says so
    if not repository:
        return RepoGitError(f"not a git repository: {git.root}")
    return RepoGitError(str(exc))
