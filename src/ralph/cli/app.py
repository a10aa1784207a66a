"""The root `ralph` command with every sub-command registered (`ralph.cli.commands`).

`ralph` itself builds only the command it runs (ralph.cli.main); this module is the whole
command tree at once, for tests and tools that walk it."""

from __future__ import annotations

from ralph.cli.commands import build_app

app = build_app()
