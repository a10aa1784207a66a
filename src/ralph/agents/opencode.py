"""opencode: `opencode run --format json PROMPT`, or attached to a server started once per
run (`opencode serve`, then `opencode run --attach URL --title "<name> - Iteration #N"`).

Events (one JSON object per line, each with a `part`): step_start {sessionID}, text,
reasoning, tool_use {part.tool, part.state: status, input, output, error}, step_finish
{part.tokens: input, output, reasoning, cache {read, write}; part.cost}, error {error}.
"""

from __future__ import annotations

from typing import Any

from ralph.agents.base import (
    Adapter,
    AgentEvent,
    Classification,
    JsonOutputParser,
    OutputParser,
    classify_failure,
    text_of,
)


class OpencodeParser(JsonOutputParser):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event["type"]
        part = event.get("part") or {}
        session = event.get("sessionID") or part.get("sessionID")
        if session:
            self.session_id = str(session)
        if kind == "text":
            return [AgentEvent("text", str(part.get("text", "")))]
        if kind == "reasoning":
            return [AgentEvent("reasoning", str(part.get("text", "")))]
        if kind == "tool_use":
            state = part.get("state") or {}
            tool = str(part.get("tool", "")) or None
            events = [AgentEvent("tool_use", text_of(state.get("input", {})), tool)]
            if state.get("status") == "completed":
                events.append(AgentEvent("tool_result", text_of(state.get("output", "")), tool))
            elif state.get("status") == "error":
                events.append(AgentEvent("tool_result", text_of(state.get("error", "")), tool))
            return events
        if kind == "step_finish":
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            cost = part.get("cost")
            self.add_usage(_sum(tokens.get("input"), cache.get("read")),
                           _sum(tokens.get("output"), tokens.get("reasoning")), cache.get("read"),
                           float(cost) if isinstance(cost, int | float) and cost > 0 else None)
            return []
        if kind == "error":
            error = event.get("error") or {}
            data = error.get("data") if isinstance(error, dict) else None
            if not isinstance(data, dict):  # a bare message where an object was expected
                data = {"message": data} if isinstance(data, str) and data else {}
            name = error.get("name") if isinstance(error, dict) else error
            message = str(data.get("message") or name or "error")
            status = data.get("statusCode")
            self.failed = True
            if name == "ProviderAuthError":
                self.auth_failed = True
            self.note_error(message, status=status if isinstance(status, int) else None)
            return [AgentEvent("error", message)]
        return []


def _sum(a: Any, b: Any) -> int | None:
    if not isinstance(a, int):
        return None
    return a + (b if isinstance(b, int) else 0)


class OpencodeAdapter(Adapter):
    name = "opencode"
    binary = "opencode"
    install_hint = "npm install -g opencode-ai"

    def default_argv(self, model: str | None) -> list[str]:
        # The prompt goes to stdin: as an argument opencode would quote it, and a long prompt
        # could exceed the kernel's limit for one argument.
        argv = ["opencode", "run", "--format", "json"]
        return [*argv, "--model", model] if model else argv

    def server_argv(self, argv: list[str]) -> list[str]:
        """`opencode serve` with the same program as the agent's argv ({port} filled later)."""
        program = argv[0] if argv else "opencode"
        return [program, "serve", "--port", "{port}", "--hostname", "127.0.0.1"]

    def attached_argv(self, argv: list[str], url: str, title: str) -> list[str]:
        """`opencode run` attached to a running server, with the iteration's title."""
        run = argv.index("run") + 1 if "run" in argv else len(argv)
        return [*argv[:run], "--attach", url, "--title", title, *argv[run:]]

    def parser(self) -> OutputParser:
        return OpencodeParser()

    def classify(self, exit_code: int | None, parser: OutputParser) -> Classification:
        failed = isinstance(parser, OpencodeParser) and parser.failed
        if exit_code == 0 and not failed:
            return Classification("ok", session_id=parser.session_id)
        return classify_failure(exit_code if exit_code else 1, parser)
