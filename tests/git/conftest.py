"""Git tests run against repositories they create, isolated from the user's git setup."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.git.helpers import IDENTITY, git, isolate_git

__all__ = ["IDENTITY"]

@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system config (hooksPath, gpgsign, colours), no inherited GIT_DIR."""
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A fresh repository with no commits, on branch `main`."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    return path
