"""Direct git calls for setting up and checking repositories in tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


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
