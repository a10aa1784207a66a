"""Output the CLIs could print that the recorded runs do not show: odd field values, words in
tool output that look like rate limits, transient errors, wait times with units, huge lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.agents import adapter_for
from ralph.agents.base import OutputParser, retry_after_seconds
from ralph.agents.runner import MAX_LINE_BYTES, run_agent
from ralph.config import parse_config


def feed(cli: str, *events: dict[str, Any], stderr: tuple[str, ...] = ()) -> OutputParser:
    parser = adapter_for(cli).parser()
    for event in events:
        parser.feed_line("stdout", json.dumps(event))
    for line in stderr:
        parser.feed_line("stderr", line)
    return parser


def verdict(cli: str, exit_code: int, parser: OutputParser) -> str:
    return adapter_for(cli).classify(exit_code, parser).status


@pytest.mark.parametrize("resets", [1e20, -1e18, 1795320000000, "soon", True])
def test_an_odd_claude_reset_time_never_loses_the_limit(resets: object) -> None:
    parser = feed("claude", {"type": "rate_limit_event",
                             "rate_limit_info": {"status": "rejected", "resetsAt": resets}})
    assert parser.rate_limited and parser.not_json == 0
    if resets == 1795320000000:  # milliseconds
        assert parser.reset_at is not None and parser.reset_at.startswith("2026-11-22T")


def test_usage_values_that_are_not_numbers_are_left_out() -> None:
    codex = feed("codex",
                 {"type": "turn.completed", "usage": {"input_tokens": "100", "output_tokens": 5}},
                 {"type": "turn.completed", "usage": {"input_tokens": 7, "output_tokens": True}})
    assert codex.usage is not None
    assert (codex.usage.input_tokens, codex.usage.output_tokens) == (7, 5)
    claude = feed("claude", {"type": "result", "subtype": "success", "is_error": False,
                             "total_cost_usd": "0.5", "usage": {"input_tokens": 3,
                                                                "output_tokens": "20"}})
    assert claude.usage is not None
    assert (claude.usage.input_tokens, claude.usage.output_tokens,
            claude.usage.cost_usd) == (3, None, None)


@pytest.mark.parametrize(("cli", "events", "expected"), [
    # a rate_limit_event that allows, then a server error: the key's name is no sign
    ("claude", [{"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}},
                {"type": "result", "subtype": "success", "is_error": True,
                 "api_error_status": 500, "duration_ms": 401, "result": "API Error: 500"}],
     "error"),
    # a tool result mentioning 401 is the project's business, not an auth failure
    ("claude", [{"type": "user", "message": {"content": [
        {"type": "tool_result", "content": "assert 401 Unauthorized == 200"}]}},
                {"type": "result", "subtype": "success", "is_error": True,
                 "api_error_status": 500, "result": "API Error: 500"}], "error"),
    # a command's output mentioning 429, then a dropped stream
    ("codex", [{"type": "item.completed", "item": {
        "type": "command_execution", "command": "pytest", "aggregated_output":
            "assert resp.status_code == 429", "exit_code": 1, "status": "failed"}},
               {"type": "turn.failed", "error": {"message": "stream disconnected"}}], "error"),
])
def test_words_in_the_agents_work_do_not_classify_the_run(
        cli: str, events: list[dict[str, Any]], expected: str) -> None:
    assert verdict(cli, 1, feed(cli, *events)) == expected


def test_a_codex_error_it_recovered_from_does_not_fail_the_turn() -> None:
    parser = feed("codex", {"type": "thread.started", "thread_id": "t1"},
                  {"type": "error", "message": "Reconnecting... 1/5 (stream error: 429)"},
                  {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert verdict("codex", 0, parser) == "ok"
    failed = feed("codex", {"type": "turn.failed", "error": {"message": "boom"}})
    assert verdict("codex", 1, failed) == "error"


@pytest.mark.parametrize(("text", "seconds"), [
    ("Retry-After: 17", 17.0),
    ("try again in 4 days 6 hours", 4 * 86400 + 6 * 3600),
    ("try again in 5 minutes", 300.0),
    ("try again in 1m30s", 90.0),
    ("try again in 20ms", 0.02),
    ("rate limited, retry after 2.5 seconds", 2.5),
    ("no wait given", None),
])
def test_wait_times_keep_their_units(text: str, seconds: float | None) -> None:
    assert retry_after_seconds(text) == seconds


@pytest.mark.parametrize("message", ["Resource has been exhausted (e.g. check quota).",
                                     "You exceeded your current quota, please check your plan"])
def test_gemini_quota_wording_is_a_rate_limit(message: str) -> None:
    parser = feed("gemini", {"type": "result", "status": "error",
                             "error": {"type": "Error", "message": message}})
    assert verdict("gemini", 1, parser) == "rate_limited"


def test_gemini_exit_status_429_is_a_rate_limit() -> None:
    assert verdict("gemini", 429 % 256, feed("gemini")) == "rate_limited"


def test_gemini_invalid_key_is_an_auth_error() -> None:
    parser = feed("gemini", stderr=("API key not valid. Please pass a valid API key.",))
    assert verdict("gemini", 144, parser) == "auth_error"


@pytest.mark.parametrize(("error", "expected"), [
    ({"name": "APIError", "data": "429 Too Many Requests"}, "rate_limited"),
    ({"name": "ProviderAuthError", "data": {"message": "no key"}}, "auth_error"),
])
def test_opencode_errors_of_other_shapes(error: dict[str, Any], expected: str) -> None:
    parser = feed("opencode", {"type": "error", "error": error})
    assert parser.not_json == 0
    assert verdict("opencode", 0, parser) == expected


_HUGE_RESULT = """
import json, sys
sys.stdin.read()
text = "x" * 300_000 + " EXIT_SIGNAL: true"
print(json.dumps({"type": "system", "subtype": "init", "session_id": "big-1"}))
print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text,
                  "session_id": "big-1", "usage": {"input_tokens": 5, "output_tokens": 7}}))
"""


async def test_json_lines_of_hundreds_of_kilobytes_stay_whole(tmp_path: Path) -> None:
    """A final answer of 300 KB arrives as one line of JSON, in many pipe reads."""
    script = tmp_path / "big.py"
    script.write_text(_HUGE_RESULT)
    config = parse_config(f"[agents.claude]\nargv = {json.dumps([sys.executable, str(script)])}"
                          "\n")
    events: list[tuple[str, dict[str, object]]] = []
    outcome = await run_agent(config.agent("claude"), "prompt", cwd=tmp_path,
                              prompt_file=tmp_path / "p.md", log_path=tmp_path / "log",
                              emit=lambda topic, meta: events.append((topic, meta)))
    assert outcome.status == "ok" and outcome.exit_signal is True
    assert outcome.usage is not None and outcome.usage.output_tokens == 7
    finished = [meta for topic, meta in events if topic == "agent.finished"]
    assert finished[0]["not_json_lines"] == 0
    assert MAX_LINE_BYTES > 300_000
