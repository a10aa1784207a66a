"""The `command` adapter: any program, plain-text output."""

from __future__ import annotations

from ralph.agents.base import Adapter


class CommandAdapter(Adapter):
    name = "command"

    def default_argv(self, model: str | None) -> list[str]:
        return []  # a command agent must say what to run
