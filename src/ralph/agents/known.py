"""The agent CLIs Ralph knows by name: their non-interactive invocation and how to install
them. Their machine-readable output formats are parsed by the adapters issue; until then the
output is kept and classified as plain text."""

from __future__ import annotations

from ralph.agents.base import Adapter


class CodexAdapter(Adapter):
    name = "codex"
    binary = "codex"
    install_hint = "npm install -g @openai/codex"

    def default_argv(self, model: str | None) -> list[str]:
        argv = ["codex", "exec", "--json", "--sandbox", "workspace-write"]
        return [*argv, "--model", model] if model else argv


class ClaudeAdapter(Adapter):
    name = "claude"
    binary = "claude"
    install_hint = "npm install -g @anthropic-ai/claude-code"

    def default_argv(self, model: str | None) -> list[str]:
        argv = ["claude", "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", "acceptEdits"]
        return [*argv, "--model", model] if model else argv


class GeminiAdapter(Adapter):
    name = "gemini"
    binary = "gemini"
    install_hint = "npm install -g @google/gemini-cli"

    def default_argv(self, model: str | None) -> list[str]:
        argv = ["gemini", "-o", "stream-json", "--approval-mode", "yolo", "-p", "{prompt}"]
        return [*argv, "--model", model] if model else argv


class OpencodeAdapter(Adapter):
    name = "opencode"
    binary = "opencode"
    install_hint = "npm install -g opencode-ai"

    def default_argv(self, model: str | None) -> list[str]:
        argv = ["opencode", "run", "--format", "json"]
        return [*argv, "--model", model, "{prompt}"] if model else [*argv, "{prompt}"]
