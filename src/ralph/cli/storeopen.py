"""Opening the store a command names (`--store`, $RALPH_STORE, .ralph/store).

Apart from ralph.cli.options, which declares the Typer option, so that commands run without
Typer (ralph.cli.fastpath) can open it too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ralph.project import store_location

if TYPE_CHECKING:
    from ralph.store import Store


def open_store(path: str | Path | None, *, sync_on_open: bool = True,
               create: bool = False) -> Store:
    """The store at `path` (see StoreOption); `sync` and `rebuild` open it without syncing so
    that what they report is their own work. Only commands that write pass `create`: a
    command that reads finds a missing store empty and leaves no `.ralph/store` behind."""
    from ralph.store import Store

    return Store(store_location(path), sync_on_open=sync_on_open, create=create)
