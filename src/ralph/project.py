"""Where the project is: its root directory and the default places of its runtime files."""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "RALPH_STORE"


def find_project_root(start: Path | None = None) -> Path:
    """The nearest directory holding `ralph.toml` or `.ralph/`, else the git root, else `start`."""
    here = (start or Path.cwd()).resolve()
    candidates = [here, *here.parents]
    for directory in candidates:
        if (directory / "ralph.toml").is_file() or (directory / ".ralph").is_dir():
            return directory
    for directory in candidates:
        if (directory / ".git").exists():
            return directory
    return here


def store_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store to use: `explicit` (a --store flag), else $RALPH_STORE, else .ralph/store."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(STORE_ENV)
    if from_env:
        return Path(from_env)
    return find_project_root() / ".ralph" / "store"
