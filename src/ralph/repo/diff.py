"""The work tree's diff against HEAD for clients (`git/diff`): staged and unstaged changes
together, untracked files as new files, before the first commit against the empty tree;
`.ralph/` left out; one path (confined: see `ralph.repo.paths`) or every change."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ralph.git import Git, GitError
from ralph.repo.paths import RALPH_DIR, confine
from ralph.repo.status import git_failure, require_top

__all__ = ["MAX_DIFF_BYTES", "FileDiff", "working_diff"]

MAX_DIFF_BYTES = 10 * 1024 * 1024
# the line Git.diff appends to a diff it cut
_CUT_MARKER = re.compile(r"\[diff truncated: \d+ of \d+ bytes shown\]\n")


@dataclass(frozen=True)
class FileDiff:
    """`path` as asked ("" for every change); `diff` at most `MAX_DIFF_BYTES` of it, cut at a
    line's end (`truncated`)."""

    path: str
    diff: str
    truncated: bool


async def working_diff(root: Path, path: str | None = None, *, git: Git | None = None,
                       max_bytes: int = MAX_DIFF_BYTES) -> FileDiff:
    """The diff of `path` (a file or a directory, relative to `root`; None: everything)
    against HEAD. FileNotFound for a path that may not be read (outside the repository, in
    .git, ...: see `confine`), RepoGitError when git fails. A path git knows nothing of has
    an empty diff. A symlink inside the repository is followed to what it names."""
    paths: tuple[str, ...] = ()
    if path is not None:
        relative = confine(root, path)
        paths = (relative,) if relative else ()
    git = git or Git(root)
    await require_top(git)
    try:
        text = await git.diff(max_bytes=max_bytes, exclude=[RALPH_DIR], paths=paths)
    except GitError as exc:
        raise await git_failure(git, exc) from None
    # A diff's lines never start with "[": the marker is the last line only when it was cut.
    last = text.rfind("\n", 0, len(text) - 1) + 1
    if text.endswith("]\n") and _CUT_MARKER.fullmatch(text, last):
        return FileDiff(path or "", text[:last], True)
    return FileDiff(path or "", text, False)
