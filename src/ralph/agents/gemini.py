"""Gemini CLI: `gemini -o stream-json --approval-mode yolo -p PROMPT`.

Events: init {session_id, model}, message {role, content, delta}, tool_use {tool_name,
tool_id, parameters}, tool_result {tool_id, status, output, error}, error {severity,
message}, result {status, stats, error}. Exit codes: 41 auth, 42 input, 44 sandbox, 52 config,
53 turn limit, 130 cancelled. Before it starts, a bad command line is yargs' "Unknown
arguments: ..." / "Invalid values: ..." on stderr (exit 1), a bad settings.json "Error in
<path>: ..." (exit 52), no key "When using Gemini API, you must specify the GEMINI_API_KEY
environment variable." (exit 41); a model the API does not know ends the stream with a result
whose error is "[API Error: models/x is not found for API version v1beta, ...]" (exit 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ralph.agents.base import (
    Adapter,
    AgentError,
    AgentEvent,
    Classification,
    JsonOutputParser,
    Login,
    OutputParser,
    classify_failure,
    insert_after,
    text_of,
    without_options,
)
from ralph.agents.login import gemini_login

GEMINI_POLICY = "gemini-policy.toml"  # in the session's folder, under approvals deny
_PLAN_ONLY = """\
# Ralph, approvals 'deny': gemini stays in its read-only plan mode.
[[rule]]
toolName = ["exit_plan_mode", "enter_plan_mode"]
decision = "deny"
priority = 999
"""

EXIT_AUTH, EXIT_INPUT, EXIT_SANDBOX, EXIT_CONFIG = 41, 42, 44, 52
EXIT_TURN_LIMIT, EXIT_CANCELLED = 53, 130
# Exits for what gemini rejected before it ran (its command line, a --resume it cannot find,
# its settings or its sandbox): the same every time, a configuration error.
_CONFIG_EXITS = {EXIT_INPUT: "invalid input", EXIT_SANDBOX: "sandbox error",
                 EXIT_CONFIG: "configuration error"}
EXIT_HTTP_429 = 429 % 256  # an HTTP error ends the CLI with its status modulo 256


class GeminiParser(JsonOutputParser):
    def __init__(self) -> None:
        super().__init__()
        self.result: dict[str, Any] | None = None
        self._tools: dict[str, str] = {}
        self._in_text = False

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        events = self._on_event(event)
        # Streamed message chunks continue each other until something else comes between.
        self._in_text = event.get("type") == "message" and event.get("role") == "assistant"
        return events

    def _on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event["type"]
        if kind == "init":
            self.session_id = str(event.get("session_id") or "") or None
            self.model = str(event.get("model") or "") or None
            return []
        if kind == "message":
            if event.get("role") == "assistant":
                return [AgentEvent("text", str(event.get("content", "")),
                                   delta=bool(event.get("delta")) and self._in_text)]
            return []
        if kind == "tool_use":
            name = str(event.get("tool_name", "")) or None
            self._tools[str(event.get("tool_id"))] = name or ""
            return [AgentEvent("tool_use", text_of(event.get("parameters", {})), name)]
        if kind == "tool_result":
            name = self._tools.get(str(event.get("tool_id"))) or None
            body = event.get("output") if event.get("status") == "success" else (
                event.get("error") or event.get("output"))
            return [AgentEvent("tool_result", text_of(body if body is not None else ""), name)]
        if kind == "error":
            message = str(event.get("message", ""))
            self.note_error(message)
            return [AgentEvent("error", message)]
        if kind == "result":
            self.result = event
            stats = event.get("stats") or {}
            self.add_usage(stats.get("input_tokens"), stats.get("output_tokens"),
                           stats.get("cached") if isinstance(stats.get("cached"), int)
                           else stats.get("cached_tokens"))
            error = event.get("error")
            if error:
                self.note_error(text_of(error.get("message", error) if isinstance(error, dict)
                                        else error))
            return []
        return []


class GeminiAdapter(Adapter):
    name = "gemini"
    binary = "gemini"
    install_hint = "npm install -g @google/gemini-cli"
    login_hint = "run `gemini` and sign in with Google, or set GEMINI_API_KEY"

    def continue_argv(self, argv: list[str], conversation: str) -> list[str]:
        return insert_after(argv, (), ["--resume", conversation])

    def approvals_argv(self, argv: list[str], mode: str, policy: str,
                       folder: Path) -> list[str]:
        # Non-interactive gemini asks nobody: tools that would need a confirmation are not
        # offered to the model, unless the approval mode pre-approves them. Its plan mode is
        # read-only, but offers exit_plan_mode, which would switch to yolo when nobody is
        # there to ask: a policy of our own denies that way out (and the way back in).
        if mode == "auto":
            return argv
        if mode == "ask":
            raise AgentError("gemini cannot run with approvals 'ask': in its non-interactive "
                             "mode it asks nobody; its --approval-mode decides (approvals "
                             "'auto': the mode in its argv, yolo by default; 'deny': "
                             "--approval-mode plan, read-only)")
        kept = without_options(argv, ("--approval-mode", "--approvalMode"), ("-y", "--yolo"))
        return insert_after(kept, (), ["--approval-mode", "plan", "--policy",
                                       str(folder / GEMINI_POLICY)])

    def approvals_files(self, mode: str) -> dict[str, str]:
        return {GEMINI_POLICY: _PLAN_ONLY} if mode == "deny" else {}

    def default_argv(self, model: str | None) -> list[str]:
        argv = ["gemini", "-o", "stream-json", "--approval-mode", "yolo"]
        return [*argv, "-m", model, "-p", "{prompt}"] if model else [*argv, "-p", "{prompt}"]

    def parser(self) -> OutputParser:
        return GeminiParser()

    def classify(self, exit_code: int | None, parser: OutputParser) -> Classification:
        result = parser.result if isinstance(parser, GeminiParser) else None
        if exit_code == 0 and (result is None or result.get("status") in (None, "success")):
            return Classification("ok", session_id=parser.session_id)
        if exit_code == EXIT_AUTH:
            return Classification("auth_error", parser.last_error or parser.last_plain_line()
                                  or "authentication failed", session_id=parser.session_id)
        if exit_code == EXIT_CANCELLED:
            return Classification("cancelled", "cancelled", session_id=parser.session_id)
        if exit_code in _CONFIG_EXITS:  # its reason is on stderr, worded as an error or not
            return Classification("config_error", parser.last_error or parser.last_plain_line()
                                  or _CONFIG_EXITS[exit_code], session_id=parser.session_id)
        if exit_code == EXIT_HTTP_429:
            parser.rate_limited = True
        return classify_failure(exit_code or 1, parser, "turn limit reached" if (
            exit_code == EXIT_TURN_LIMIT and not parser.rate_limited) else None)

    def login(self, env: Mapping[str, str], cwd: Path, model: str | None) -> Login:
        return gemini_login(env, cwd, self.login_hint)
