"""Each adapter's stream parser and classification, on output recorded from the real CLIs
(tests/agents/recorded, captured against the fake model server), and on broken output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.agents import adapter_for
from ralph.agents.base import AgentEvent, Classification, OutputParser

RECORDED = Path(__file__).parent / "recorded"


def replay(name: str) -> tuple[list[AgentEvent], Classification, OutputParser]:
    info = json.loads((RECORDED / f"{name}.json").read_text())
    adapter = adapter_for(info["cli"])
    parser = adapter.parser()
    events: list[AgentEvent] = []
    for stream in ("stdout", "stderr"):
        text = (RECORDED / f"{name}.{stream}").read_text(errors="replace")
        for line in text.splitlines():
            events += parser.feed_line(stream, line)
    return events, adapter.classify(info["exit_code"], parser), parser


def said(events: list[AgentEvent]) -> str:
    """The agent's text as the runner rebuilds it: streamed pieces joined, lines apart."""
    text = ""
    for e in events:
        if e.kind == "text" and e.said:
            text += e.content if e.delta else "\n" + e.content
    return text


@pytest.mark.parametrize("cli", ["codex", "claude", "gemini", "opencode"])
def test_success_writes_the_file_through_a_tool(cli: str) -> None:
    events, verdict, parser = replay(f"{cli}-success")
    assert verdict.status == "ok"
    assert parser.session_id
    assert any(e.kind == "tool_use" for e in events)
    assert "EXIT_SIGNAL: true" in said(events)  # gemini streams it in three delta pieces
    assert parser.usage is not None
    assert (parser.usage.input_tokens, parser.usage.output_tokens) == (2400, 80)
    assert parser.not_json == 0


def test_claude_reports_its_own_cost() -> None:
    _, _, parser = replay("claude-success")
    assert parser.usage is not None and parser.usage.cost_usd == pytest.approx(0.0112)


@pytest.mark.parametrize("cli", ["codex", "claude", "gemini", "opencode"])
def test_shell_tool_run(cli: str) -> None:
    events, verdict, _ = replay(f"{cli}-shell")
    assert verdict.status == "ok"
    assert any(e.kind == "tool_result" for e in events)


@pytest.mark.parametrize("name", ["codex-429", "codex-429-stream", "claude-429",
                                  "claude-429-stream", "claude-429-unified", "gemini-429",
                                  "opencode-429", "opencode-429-stream"])
def test_rate_limits_are_recognised(name: str) -> None:
    _, verdict, _ = replay(name)
    assert verdict.status == "rate_limited", verdict


@pytest.mark.parametrize("name", ["claude-429", "gemini-429", "opencode-429",
                                  "codex-429-stream"])
def test_retry_after_is_read_from_the_message(name: str) -> None:
    _, verdict, _ = replay(name)
    assert verdict.retry_after_s == 1.0


@pytest.mark.parametrize("cli", ["codex", "claude", "gemini", "opencode"])
def test_authentication_failures(cli: str) -> None:
    _, verdict, _ = replay(f"{cli}-401")
    assert verdict.status == "auth_error", verdict
    assert "401" in verdict.message or "Invalid API key" in verdict.message


def test_a_broken_stream_is_an_error_not_success() -> None:
    _, verdict, _ = replay("gemini-429-stream")  # the model stream ended mid-way, exit 0
    assert verdict.status == "error"
    assert "finish reason" in verdict.message


@pytest.mark.parametrize("cli", ["codex", "claude", "gemini", "opencode"])
def test_garbage_mid_stream_is_kept_as_text_and_counted(cli: str) -> None:
    adapter = adapter_for(cli)
    parser = adapter.parser()
    lines = (RECORDED / f"{cli}-success.stdout").read_text().splitlines()
    garbage = ["this is not json", "{\"truncated\": ", "[1, 2]", "\x00\x01binary",
               "{\"type\": 12}", "{}"]
    events: list[AgentEvent] = []
    for index, line in enumerate(lines):
        events += parser.feed_line("stdout", line)
        if index == 1:
            for junk in garbage:
                events += parser.feed_line("stdout", junk)
    texts = [e.content for e in events if e.kind == "text"]
    for junk in garbage[:4]:
        assert junk in texts
    assert parser.not_json >= 4
    assert adapter.classify(0, parser).status == "ok"


def test_stderr_warnings_are_text_and_errors_are_errors() -> None:
    parser = adapter_for("gemini").parser()
    [warning] = parser.feed_stderr("YOLO mode is enabled. All tool calls will be approved.")
    [error] = parser.feed_stderr("Error when talking to Gemini API: 429 Too Many Requests")
    assert (warning.kind, error.kind) == ("text", "error")
    assert parser.rate_limited


def test_claude_rate_limit_event_gives_the_reset_time() -> None:
    parser = adapter_for("claude").parser()
    parser.feed_line("stdout", json.dumps({"type": "rate_limit_event", "rate_limit_info": {
        "status": "rejected", "resetsAt": 1795320000}}))
    assert parser.rate_limited
    assert parser.reset_at is not None and parser.reset_at.startswith("2026-11-22T")
    parser.feed_line("stdout", json.dumps({"type": "result", "subtype": "success",
                                           "is_error": True, "result": "limit"}))
    verdict = adapter_for("claude").classify(1, parser)
    assert verdict.status == "rate_limited" and verdict.reset_at == parser.reset_at


def test_claude_without_a_result_is_an_error_even_with_exit_0() -> None:
    parser = adapter_for("claude").parser()
    verdict = adapter_for("claude").classify(0, parser)
    assert verdict.status == "error" and "without a result" in verdict.message


@pytest.mark.parametrize(("code", "status"), [(41, "auth_error"), (130, "cancelled"),
                                               (52, "config_error"), (53, "error"),
                                               (42, "config_error"), (44, "config_error")])
def test_gemini_exit_codes(code: int, status: str) -> None:
    adapter = adapter_for("gemini")
    assert adapter.classify(code, adapter.parser()).status == status
