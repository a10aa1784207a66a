"""Helpers for the repository tests (and the remote ones that serve a repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.git.helpers import git

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
}


def isolate_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system config, no inherited GIT_DIR; a fixed identity (children started
    by the test inherit this environment too)."""
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES",
                 "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in IDENTITY.items():
        monkeypatch.setenv(name, value)


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
