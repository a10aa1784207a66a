"""Repository-service tests run against repositories they create, isolated from the user's
git setup (as tests/git does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.repo.helpers import isolate_git, make_repo


@pytest.fixture(autouse=True)
def _isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(tmp_path, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on branch `main` with one commit (tracked.txt, .gitignore)."""
    return make_repo(tmp_path / "repo")
