"""opencode: `opencode run --format json PROMPT`, or attached to a server started once per
run (`opencode serve`, then `opencode run --attach URL --title "<name> - Iteration #N"`).

Events (one JSON object per line, each with a `part`): step_start {sessionID}, text,
reasoning, tool_use {part.tool, part.state: status, input, output, error}, step_finish
{part.tokens: input, output, reasoning, cache {read, write}; part.cost}, error {error}.

What went wrong before the model was asked is only in opencode's log: the event says
"Unexpected server error. Check server logs for details.". `--print-logs --log-level ERROR`
puts the log on stderr (nothing at all on a run that goes well), where a model opencode cannot
use reads `error="ProviderModelNotFoundError: Model not found: p/m. Did you mean: ...?"`. The
model's own name among the suggestions means its provider is known but not connected: no
credentials. A bad command line makes opencode print its usage (and nothing else) on stderr,
exit 1; a bad config "Error: Config file at ... is not valid JSON(C)".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ralph.agents.base import (
    Adapter,
    AgentEvent,
    Classification,
    JsonOutputParser,
    Login,
    OutputParser,
    classify_failure,
    insert_after,
    text_of,
)
from ralph.agents.login import opencode_login

# In opencode's log line: error="ProviderModelNotFoundError: Model not found: p/m. Did you
# mean: a, b?" (the class name makes it opencode's own, not a tool's output); its server's
# log wraps it: cause="Cause([Die(ProviderModelNotFoundError: Model not found: p/m.)])".
_MODEL_NOT_FOUND = re.compile(r"ProviderModelNotFoundError: Model not found: (?P<provider>[^/\s]+)"
                              r"/(?P<model>[^\s\")\]]+?)\.?(?: Did you mean: (?P<hints>[^?\"]*)\?)?"
                              r"(?=[\s\")\]]|$)")
_USAGE = re.compile(r"^opencode(?: [a-z]+)* \[")  # yargs' usage: "opencode run [message..]"
# The event that only points at the log ("Unexpected server error. Check server logs ...")
_SEE_LOG = "check server logs"


class OpencodeParser(JsonOutputParser):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False
        self.usage_shown = False  # opencode printed its usage: it rejected its command line

    def feed_stderr(self, line: str) -> list[AgentEvent]:
        if not self.started and _USAGE.match(line):
            self.usage_shown = True
        found = _MODEL_NOT_FOUND.search(line)
        if found is None:
            return super().feed_stderr(line)
        self.plain.append(line)
        message = found.group(0).split(": ", 1)[1]
        provider, model = found.group("provider"), found.group("model")
        if model in [hint.strip() for hint in (found.group("hints") or "").split(",")]:
            # the catalogue has the model, the provider is not connected: no credentials
            self.auth_failed = True
            message = f"provider '{provider}' is not connected (no credentials): {message}"
        else:
            self.config_failed = True
        self.last_error = message
        return [AgentEvent("error", line, said=False)]

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
            # An error that only points at the log keeps what the log said, if it came first.
            self.note_error(message, status=status if isinstance(status, int) else None,
                            structured=_SEE_LOG not in message.lower())
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
    login_hint = ("run `opencode auth login`, or set the provider's API key (e.g. "
                  "ANTHROPIC_API_KEY)")

    def continue_argv(self, argv: list[str], conversation: str) -> list[str]:
        return insert_after(argv, ("run",), ["--session", conversation])

    def approvals_argv(self, argv: list[str], mode: str, policy: str,
                       folder: Path) -> list[str]:
        # ask and deny: `opencode run` rejects its session's permission requests itself, so
        # ralph.approvals.opencode_run runs the turn on `opencode serve` instead, answering
        # each request by the session's policy (given inline: a file could be rewritten by
        # the agent); it prints what `opencode run --format json` would, and reads the
        # prompt from stdin as `opencode run` does.
        if mode == "auto":
            return argv
        return [sys.executable, "-I", "-m", "ralph.approvals.opencode_run", policy, "--",
                *argv]

    def default_argv(self, model: str | None) -> list[str]:
        # The prompt goes to stdin: as an argument opencode would quote it, and a long prompt
        # could exceed the kernel's limit for one argument. Its errors go to stderr: without
        # them a model it cannot use is only "Unexpected server error".
        argv = ["opencode", "run", "--format", "json", "--print-logs", "--log-level", "ERROR"]
        return [*argv, "--model", model] if model else argv

    def server_argv(self, argv: list[str], command: str = "serve") -> list[str]:
        """`opencode serve` (or `web`: the same server with its web UI) with the same program
        as the agent's argv ({port} filled later)."""
        program = argv[0] if argv else "opencode"
        return [program, command, "--port", "{port}", "--hostname", "127.0.0.1"]

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
        if isinstance(parser, OpencodeParser) and parser.usage_shown and not parser.started:
            # yargs printed the usage and swallowed its reason (an unknown option, a bad value)
            parser.config_failed = True
            parser.last_error = ("opencode rejected its command line (it printed its usage: "
                                 "an unknown option or an invalid value)")
        return classify_failure(exit_code if exit_code else 1, parser)

    def login(self, env: Mapping[str, str], cwd: Path, model: str | None) -> Login:
        return opencode_login(env, cwd, model, self.login_hint)
