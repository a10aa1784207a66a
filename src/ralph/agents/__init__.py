"""Agent adapters: run an agent CLI on a prompt, stream and normalise its output."""

from __future__ import annotations

from ralph.agents.base import (
    Adapter,
    AgentCommand,
    AgentError,
    AgentEvent,
    AgentStatus,
    Classification,
    OutputParser,
    Usage,
)
from ralph.agents.claude import ClaudeAdapter
from ralph.agents.codex import CodexAdapter
from ralph.agents.command import CommandAdapter
from ralph.agents.gemini import GeminiAdapter
from ralph.agents.opencode import OpencodeAdapter

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (
    CommandAdapter(), CodexAdapter(), ClaudeAdapter(), GeminiAdapter(), OpencodeAdapter())}


def adapter_for(name: str) -> Adapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise AgentError(f"unknown agent adapter {name!r}: use one of "
                         f"{', '.join(sorted(ADAPTERS))}") from None


__all__ = [
    "ADAPTERS",
    "Adapter",
    "AgentCommand",
    "AgentError",
    "AgentEvent",
    "AgentStatus",
    "Classification",
    "OutputParser",
    "Usage",
    "adapter_for",
]
