"""Helpers for the repository tests (and the remote ones that serve a repository)."""

from __future__ import annotations

from pathlib import Path

from tests.git.helpers import IDENTITY, git, isolate_git

__all__ = ["IDENTITY", "isolate_git", "make_repo"]


def make_repo(path: Path) -> Path:
    """A repository on branch `main` with one commit (tracked.txt, .gitignore ignoring
    `*.log` and `build/`)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "tracked.txt").write_text("one\ntwo\n")
    (path / ".gitignore").write_text("*.log\nbuild/\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    return path
