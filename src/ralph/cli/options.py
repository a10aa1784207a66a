"""Options several commands share, and opening the store they name (ralph.cli.storeopen)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.storeopen import open_store

__all__ = ["StoreOption", "open_store"]

StoreOption = Annotated[
    Path | None,
    typer.Option("--store", metavar="PATH", help="Store directory (default: $RALPH_STORE, "
                                                 "else .ralph/store under the project root).",
                 show_default=False),
]
