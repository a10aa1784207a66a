"""Options several commands share, and opening the store they name."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ralph.project import store_path

if TYPE_CHECKING:
    from ralph.store import Store

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", metavar="PATH", help="Store directory (default: $RALPH_STORE, "
                                                 "else .ralph/store under the project root).",
                 show_default=False),
]


def open_store(path: Path | None, *, sync_on_open: bool = True, create: bool = False) -> Store:
    """The store at `path` (see StoreOption); `sync` and `rebuild` open it without syncing so
    that what they report is their own work. Only commands that write pass `create`: a
    command that reads finds a missing store empty and leaves no `.ralph/store` behind."""
    from ralph.store import Store

    return Store(store_path(path), sync_on_open=sync_on_open, create=create)
