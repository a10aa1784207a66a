"""The `ralph` command line: a thin face over the store, notes and (later) loop services."""

from ralph.cli.main import main

__all__ = ["main"]
