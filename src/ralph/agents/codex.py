"""Codex CLI: `codex exec --json`, prompt on stdin, JSONL events on stdout.

Events: thread.started {thread_id} (the session id: `codex exec resume <id>` continues it),
turn.started, turn.completed {usage}, turn.failed {error}, item.started|updated|completed
{item: agent_message | reasoning | command_execution | file_change | mcp_tool_call |
web_search | todo_list | error}, error {message}. A rate limit shows as `response.failed`
with `rate_limit_exceeded`, surfacing as turn.failed / error mentioning it or HTTP 429. A
model the API does not know fails the turn with the API's words ("The model `x` does not exist
or you do not have access to it."); a missing key with "Missing environment variable: `X`."
(a provider's env_key). A bad command line (clap: "error: unexpected argument ...", exit 2)
or config.toml ("Error loading config.toml: ...") is said on stderr before any event.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ralph.agents.base import (
    PROMPT_PLACEHOLDER,
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
from ralph.agents.login import codex_login

# Options that turn the sandbox off: approvals 'deny' takes them out.
_UNSANDBOXED = ("--full-auto", "--dangerously-bypass-approvals-and-sandbox", "--yolo")


class CodexParser(JsonOutputParser):
    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event["type"]
        if kind == "thread.started":
            self.session_id = str(event.get("thread_id") or "") or None
            return []
        if kind in ("turn.started",):
            return []
        if kind == "turn.completed":
            # An `error` event before it was a notice the CLI recovered from (codex prints
            # "Reconnecting... 1/5" as one): the turn completed, so it does not count.
            self.failed = self.rate_limited = self.auth_failed = self.config_failed = False
            usage = event.get("usage") or {}
            self.add_usage(usage.get("input_tokens"), usage.get("output_tokens"),
                           usage.get("cached_input_tokens"))
            return []
        if kind in ("turn.failed", "error"):
            error = event.get("error")
            message = str(error.get("message", error) if isinstance(error, dict)
                          else event.get("message", error))
            self.failed = True
            # `error` may be a notice codex recovers from ("Reconnecting... 2/5 (unexpected
            # status 404 ...)" before it falls back from WebSockets); turn.failed is final.
            self.note_error(message, final=kind == "turn.failed")
            return [AgentEvent("error", message)]
        if kind.startswith("item."):
            return self._item(kind, event["item"])
        return []

    def _item(self, kind: str, item: dict[str, Any]) -> list[AgentEvent]:
        item_type = item.get("type")
        done = kind == "item.completed"
        if item_type == "agent_message":
            return [AgentEvent("text", str(item.get("text", "")))] if done else []
        if item_type == "reasoning":
            return [AgentEvent("reasoning", str(item.get("text", "")))] if done else []
        if item_type == "command_execution":
            if kind == "item.started":
                return [AgentEvent("tool_use", str(item.get("command", "")), "shell")]
            if done:
                output = str(item.get("aggregated_output", ""))
                code = item.get("exit_code")
                return [AgentEvent("tool_result", f"{output}[exit {code}]" if output
                                   else f"[exit {code}]", "shell")]
            return []
        if item_type == "file_change" and done:
            changes = ", ".join(f"{c.get('kind', '?')} {c.get('path', '?')}"
                                for c in item.get("changes", []))
            return [AgentEvent("tool_use", changes, "apply_patch")]
        if item_type == "mcp_tool_call":
            tool = f"{item.get('server', 'mcp')}.{item.get('tool', '?')}"
            if kind == "item.started":
                return [AgentEvent("tool_use", text_of(item.get("arguments", "")), tool)]
            if done:
                return [AgentEvent("tool_result", text_of(item.get("result", "")), tool)]
            return []
        if item_type == "web_search" and done:
            return [AgentEvent("tool_use", str(item.get("query", "")), "web_search")]
        if item_type == "error" and done:
            # a warning codex carries on after ("Model metadata for `x` not found")
            message = str(item.get("message", ""))
            self.note_error(message, final=False)
            return [AgentEvent("error", message)]
        return []


class CodexAdapter(Adapter):
    name = "codex"
    binary = "codex"
    install_hint = "npm install -g @openai/codex"
    # `codex exec` sends CODEX_API_KEY, not OPENAI_API_KEY (checked with 0.169.0)
    login_hint = ("run `codex login` (an API key: `printenv OPENAI_API_KEY | codex login "
                  "--with-api-key`), or set CODEX_API_KEY")

    def continue_argv(self, argv: list[str], conversation: str) -> list[str]:
        # `codex exec [OPTIONS] resume <id> [PROMPT]`: the subcommand and the id go just
        # before the prompt (`-` for stdin, or the placeholder), exec's options before them.
        for i in range(len(argv) - 1, 0, -1):
            if argv[i] == "-" or PROMPT_PLACEHOLDER in argv[i]:
                return [*argv[:i], "resume", conversation, *argv[i:]]
        return [*argv, "resume", conversation]

    def approvals_argv(self, argv: list[str], mode: str, policy: str,
                       folder: Path) -> list[str]:
        # `codex exec` never asks: its approval policy is "never" and its sandbox decides.
        if mode == "auto":
            return argv
        if mode == "ask":
            raise AgentError("codex cannot run with approvals 'ask': `codex exec` asks "
                             "nobody before it acts; its sandbox decides what it may do "
                             "(approvals 'auto': the sandbox in its argv, workspace-write by "
                             "default; 'deny': --sandbox read-only)")
        return insert_after(without_options(argv, ("-s", "--sandbox"), _UNSANDBOXED),
                            ("exec", "e"), ["--sandbox", "read-only"])

    def default_argv(self, model: str | None) -> list[str]:
        # workspace-write: the agent edits the project and runs commands inside a sandbox.
        # Full auto (no sandbox, for an already isolated machine): replace it in ralph.toml
        # argv with --dangerously-bypass-approvals-and-sandbox.
        argv = ["codex", "exec", "--json", "--sandbox", "workspace-write",
                "--skip-git-repo-check", "--color", "never"]
        return [*argv, "--model", model, "-"] if model else [*argv, "-"]  # `-`: prompt on stdin

    def parser(self) -> OutputParser:
        return CodexParser()

    def classify(self, exit_code: int | None, parser: OutputParser) -> Classification:
        failed = isinstance(parser, CodexParser) and parser.failed
        if exit_code == 0 and not failed:
            return Classification("ok", session_id=parser.session_id)
        return classify_failure(exit_code or 1, parser)

    def login(self, env: Mapping[str, str], cwd: Path, model: str | None) -> Login:
        return codex_login(env, self.login_hint)
