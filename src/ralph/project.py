"""Where the project is: its root directory and the default places of its runtime files."""

from __future__ import annotations

import os
from pathlib import Path

from ralph.errors import RalphError

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


def store_location(explicit: str | os.PathLike[str] | None = None) -> str | Path:
    """The store to use: `explicit` (a --store flag), else $RALPH_STORE, else .ralph/store;
    a `postgresql://` URL is kept as it is, anything else is a directory."""
    chosen = explicit or os.environ.get(STORE_ENV)
    if isinstance(chosen, str) and _is_url(chosen):
        return chosen
    return Path(chosen) if chosen else find_project_root() / ".ralph" / "store"


def store_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store directory to use (as store_location); StoreLocationError for a database URL,
    where the command needs a directory."""
    location = store_location(explicit)
    if isinstance(location, str):
        raise StoreLocationError(
            "this command keeps its frames in a directory store, not a database: "
            "give --store a directory")
    return location


class StoreLocationError(RalphError):
    """A database URL where only a store directory will do."""


def _is_url(text: str) -> bool:
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in ("postgresql", "postgres")
