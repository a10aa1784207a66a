"""The `command` adapter: any program, plain-text output."""

from __future__ import annotations

from ralph.agents.base import Adapter, Classification, OutputParser

# What a shell exits with when the command it was given cannot start: 126 found but not
# executable, 127 not found. The only sign of a configuration error a plain program gives:
# its words are its own business (a test run may well print "unknown option").
_CANNOT_START = {126: "cannot execute", 127: "command not found"}


class CommandAdapter(Adapter):
    name = "command"

    def default_argv(self, model: str | None) -> list[str]:
        return []  # a command agent must say what to run

    def classify(self, exit_code: int | None, parser: OutputParser) -> Classification:
        if exit_code in _CANNOT_START:
            return Classification("config_error", parser.last_plain_line() or
                                  f"exited with {exit_code} ({_CANNOT_START[exit_code]})",
                                  session_id=parser.session_id)
        return super().classify(exit_code, parser)

