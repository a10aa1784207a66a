"""The adapter interface: how an agent CLI is invoked, and how its output is understood.

An adapter turns a resolved agent (ralph.toml's `[agents.<name>]`) and a prompt into a
command line, reads the CLI's output as it streams (normalised into AgentEvents), and
classifies how the run ended. The loop never looks at a CLI's own output format.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from ralph.errors import RalphError

AgentStatus = Literal["ok", "error", "rate_limited", "auth_error", "timeout", "cancelled"]
OutputKind = Literal["text", "reasoning", "tool_use", "tool_result", "error"]

PROMPT_PLACEHOLDER = "{prompt}"
PROMPT_FILE_PLACEHOLDER = "{prompt_file}"


class AgentError(RalphError):
    """An agent that cannot be started: unknown adapter, binary not on PATH, bad argv."""


@dataclass(frozen=True)
class AgentCommand:
    """What to run: argv, extra environment, and the bytes for stdin (None: nothing)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None


@dataclass(frozen=True)
class AgentEvent:
    """One normalised piece of an agent's output (the `agent.output` event's meta)."""

    kind: OutputKind
    content: str
    tool: str | None = None

    def meta(self) -> dict[str, Any]:
        return {"kind": self.kind, "content": self.content, "tool": self.tool}


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None


@dataclass
class Classification:
    """How a run ended, as far as the adapter can tell from exit code and output."""

    status: AgentStatus
    message: str = ""
    session_id: str | None = None
    reset_at: str | None = None  # UTC ISO-8601, when a rate limit lifts (if the CLI says)
    retry_after_s: float | None = None


_RATE_LIMIT = re.compile(r"\b429\b|rate[ _-]?limit|too many requests|usage limit|quota exceeded",
                         re.IGNORECASE)
_RETRY_AFTER = re.compile(r"retry[ -]after[:= ]+(\d+(?:\.\d+)?)\s*(?:s\b|sec|seconds)?",
                          re.IGNORECASE)
_AUTH = re.compile(r"\b401\b|unauthori[sz]ed|invalid api key|not logged in|authentication",
                   re.IGNORECASE)


def classify_text(exit_code: int | None, tail: str) -> Classification:
    """Classify a plain-text run: exit 0 is ok; otherwise look for rate-limit and auth signs
    in the last lines of output (HTTP 429, "rate limit", "usage limit", "Retry-After: N")."""
    if exit_code == 0:
        return Classification("ok")
    last = "\n".join(tail.strip().splitlines()[-20:])
    message = last.splitlines()[-1][:300] if last else f"exited with {exit_code}"
    if _RATE_LIMIT.search(last):
        match = _RETRY_AFTER.search(last)
        return Classification("rate_limited", message,
                              retry_after_s=float(match.group(1)) if match else None)
    if _AUTH.search(last):
        return Classification("auth_error", message)
    return Classification("error", message)


class Adapter(ABC):
    """One agent CLI. Subclasses are stateless; per-run parsing state lives in OutputParser."""

    name: str
    binary: str | None = None  # the program a default command runs (for `doctor`, PATH errors)
    install_hint: str | None = None  # how to get `binary`, e.g. "npm install -g @openai/codex"

    @abstractmethod
    def default_argv(self, model: str | None) -> list[str]:
        """The CLI's non-interactive invocation when ralph.toml gives no argv."""

    def build(self, argv: list[str], model: str | None, prompt: str,
              prompt_file: str) -> AgentCommand:
        """Fill `{prompt}` / `{prompt_file}` in argv; without either, the prompt goes to stdin."""
        base = argv or self.default_argv(model)
        if not base:
            raise AgentError(f"agent adapter '{self.name}' needs an argv in ralph.toml")
        uses_placeholder = any(PROMPT_PLACEHOLDER in a or PROMPT_FILE_PLACEHOLDER in a
                               for a in base)
        filled = [a.replace(PROMPT_FILE_PLACEHOLDER, prompt_file).replace(PROMPT_PLACEHOLDER,
                                                                           prompt)
                  for a in base]
        return AgentCommand(filled, stdin=None if uses_placeholder else prompt.encode())

    def parser(self) -> OutputParser:
        return OutputParser()

    def classify(self, exit_code: int | None, tail: str, parser: OutputParser) -> Classification:
        return classify_text(exit_code, tail)


class OutputParser:
    """Turns output lines into AgentEvents; the base class treats every line as text."""

    def __init__(self) -> None:
        self.usage: Usage | None = None
        self.session_id: str | None = None

    def feed_line(self, stream: str, line: str) -> list[AgentEvent]:
        kind: OutputKind = "text" if stream == "stdout" else "error"
        return [AgentEvent(kind, line)]
