"""Claude Code: `claude -p --output-format stream-json --verbose`, prompt on stdin.

Events: system/init {session_id, model}, assistant {message.content: text | thinking |
tool_use}, user {message.content: tool_result}, rate_limit_event {rate_limit_info: status,
resetsAt}, and the final result {subtype, is_error, result, session_id, num_turns,
total_cost_usd, usage, api_error_status}. The exit code is not a reliable success signal:
the result object decides. As root with permissions bypassed it needs IS_SANDBOX=1. An API
error also shows as an assistant message with an `error` kind (authentication_failed,
model_not_found, rate_limit, ...); a bad command line as commander's "error: unknown option
'--x'" on stderr, before any event.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

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
)
from ralph.agents.login import claude_login

# The `error` of claude's synthetic assistant message for an API error, as claude classifies
# it; the kinds no retry fixes (rate limits are read from api_error_status and the result).
_AUTH_KINDS = frozenset({"authentication_failed", "oauth_org_not_allowed",
                         "cloud_credential_error"})
_CONFIG_KINDS = frozenset({"model_not_found"})


class ClaudeParser(JsonOutputParser):
    def __init__(self) -> None:
        super().__init__()
        self.result: dict[str, Any] | None = None

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        kind = event["type"]
        if event.get("session_id"):
            self.session_id = str(event["session_id"])
        if kind == "system":
            if event.get("subtype") == "init" and event.get("model"):
                self.model = str(event["model"])
            return []
        if kind == "assistant":
            self._api_error_kind(event.get("error"))
            return [e for block in event["message"].get("content", [])
                    for e in self._assistant_block(block)]
        if kind == "user":
            content = event["message"].get("content", [])
            return [AgentEvent("tool_result", text_of(block.get("content", "")),
                               str(block.get("tool_use_id", "")) or None)
                    for block in content if isinstance(block, dict)
                    and block.get("type") == "tool_result"]
        if kind == "rate_limit_event":
            info = event.get("rate_limit_info") or {}
            if info.get("status") not in (None, "allowed", "allowed_warning"):
                self.rate_limited = True
            self.reset_at = _reset_time(info.get("resetsAt")) or self.reset_at
            return []
        if kind == "result":
            self.result = event
            usage = event.get("usage") or {}
            self.add_usage(
                _int(usage.get("input_tokens")) + _int(usage.get("cache_read_input_tokens"))
                + _int(usage.get("cache_creation_input_tokens")) if usage else None,
                usage.get("output_tokens"), usage.get("cache_read_input_tokens"),
                event.get("total_cost_usd"))
            if event.get("is_error"):
                status = event.get("api_error_status")
                self.note_error(str(event.get("result") or event.get("subtype") or "error"),
                                status=status if isinstance(status, int) else None)
            return []
        return []

    def _api_error_kind(self, kind: object) -> None:
        """claude's own verdict on an API error ("model_not_found", ...): a structured sign."""
        if kind in _AUTH_KINDS:
            self.auth_failed = True
        elif kind in _CONFIG_KINDS:
            self.config_failed = True

    def _assistant_block(self, block: dict[str, Any]) -> list[AgentEvent]:
        kind = block.get("type")
        if kind == "text":
            return [AgentEvent("text", str(block.get("text", "")))]
        if kind == "thinking":
            return [AgentEvent("reasoning", str(block.get("thinking", "")))]
        if kind == "tool_use":
            return [AgentEvent("tool_use", text_of(block.get("input", {})),
                               str(block.get("name", "")) or None)]
        return []


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


class ClaudeAdapter(Adapter):
    name = "claude"
    binary = "claude"
    install_hint = "npm install -g @anthropic-ai/claude-code"
    login_hint = ("run `claude auth login`, or set ANTHROPIC_API_KEY (or "
                  "CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`)")

    def continue_argv(self, argv: list[str], conversation: str) -> list[str]:
        return insert_after(argv, ("-p", "--print"), ["--resume", conversation])

    def approvals_argv(self, argv: list[str], mode: str, policy: str,
                       folder: Path) -> list[str]:
        # ask and deny: a PreToolUse hook (ralph.approvals.claude_hook) decides every tool
        # call; Claude Code runs hooks in -p mode too, and a hook's denial holds in every
        # permission mode. The settings go inline: a file could be rewritten by the agent.
        if mode == "auto":
            return argv
        if any(arg == "--settings" or arg.startswith("--settings=") for arg in argv):
            raise AgentError(f"claude cannot run with approvals '{mode}' with --settings in "
                             "its argv: Ralph passes its own (its approval hook), and later "
                             "settings could switch that hook off; move those settings to "
                             ".claude/settings.json")
        from ralph.approvals.claude_hook import settings  # noqa: PLC0415 - sessions only
        from ralph.approvals.policy import PolicyFile  # noqa: PLC0415

        timeout_s = PolicyFile.decode(policy).policy.timeout_s
        inline = orjson.dumps(settings(policy, timeout_s)).decode()
        return insert_after(argv, ("-p", "--print"), ["--settings", inline])

    def default_argv(self, model: str | None) -> list[str]:
        # acceptEdits: file edits are allowed, other tools are not. Full auto: replace it in
        # ralph.toml argv with `--permission-mode bypassPermissions` (as root also set
        # env IS_SANDBOX = "1").
        argv = ["claude", "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", "acceptEdits"]
        return [*argv, "--model", model] if model else argv

    def parser(self) -> OutputParser:
        return ClaudeParser()

    def classify(self, exit_code: int | None, parser: OutputParser) -> Classification:
        result = parser.result if isinstance(parser, ClaudeParser) else None
        if result is not None and not result.get("is_error") and (
                result.get("subtype") in (None, "success")):
            return Classification("ok", session_id=parser.session_id)
        message = None
        if result is not None:
            message = str(result.get("result") or result.get("subtype") or "error")[:300]
        elif exit_code == 0:
            message = "claude ended without a result"
        return classify_failure(exit_code if exit_code else 1, parser, message)

    def login(self, env: Mapping[str, str], cwd: Path, model: str | None) -> Login:
        return claude_login(env, self.login_hint)


def _reset_time(value: object) -> str | None:
    """`resetsAt` (epoch seconds; milliseconds too) as UTC ISO-8601; None if it is no time."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    seconds = value / 1000 if value > 1e11 else value  # after 5138 in seconds: milliseconds
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None
