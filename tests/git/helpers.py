"""Direct git calls for setting up and checking repositories in tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def git(repo: Path, *args: str) -> str:
    """Run git directly (not through the code under test) and return its stdout."""
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True, stdin=subprocess.DEVNULL, timeout=60)
    return done.stdout


def write(repo: Path, relative: str, text: str) -> Path:
    path = repo / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


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
