"""Options several commands share, and opening the store they name (ralph.cli.storeopen)."""

from __future__ import annotations

from typing import Annotated

import typer

from ralph.cli.storeopen import open_store

__all__ = ["StoreOption", "open_store"]

StoreOption = Annotated[
    str | None,
    typer.Option("--store", metavar="PATH|URL",
                 help="Store directory or postgresql:// URL (default: $RALPH_STORE, else "
                      ".ralph/store under the project root).",
                 show_default=False),
]
