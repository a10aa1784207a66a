"""Failures no retry fixes, as the adapters classify them: `auth_error` (a key the API refuses,
no key) and `config_error` (an option the CLI does not have, a broken config file, a model
the API or the CLI does not know). From the streams recorded from the real CLIs
(tests/agents/recorded: 401, 404, bad-flag, no-key, unknown-model) and from the shapes the
CLIs print that a recording does not show; and what must stay a plain error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ralph.agents import ADAPTERS, adapter_for
from ralph.agents.base import OutputParser
from ralph.testing.fakellm import fakellm_server
from tests.agents.test_parsers import replay
from tests.fakellm.helpers import send

RECORDED: dict[str, tuple[str, str]] = {  # name -> (status, words of the message)
    "codex-401": ("auth_error", "unexpected status 401 Unauthorized: Invalid API key"),
    "claude-401": ("auth_error", "API Error: 401 Invalid API key"),
    "gemini-401": ("auth_error", "\"code\":401"),
    "opencode-401": ("auth_error", "Invalid API key (fake)."),
    "codex-no-key": ("auth_error", "Missing environment variable: `FAKE_OPENAI_API_KEY`."),
    "claude-no-key": ("auth_error", "Not logged in · Please run /login"),
    "gemini-no-key": ("auth_error", "you must specify the GEMINI_API_KEY environment variable"),
    "opencode-no-key": ("auth_error", "provider 'anthropic' is not connected (no credentials): "
                                      "Model not found: anthropic/claude-sonnet-4-5"),
    "codex-404": ("config_error", "The model `gpt-5.5` does not exist or you do not have "
                                  "access to it."),
    "claude-404": ("config_error", "There's an issue with the selected model "
                                   "(claude-opus-5-5)."),
    "gemini-404": ("config_error", "models/gemini-2.5-flash is not found for API version"),
    "opencode-404": ("config_error", "The model `fake-model` does not exist"),
    "opencode-unknown-model": ("config_error", "Model not found: fake/no-such-model. Did you "
                                               "mean: fake-model?"),
    "codex-bad-flag": ("config_error", "error: unexpected argument '--no-such-flag' found"),
    "claude-bad-flag": ("config_error", "error: unknown option '--no-such-flag'"),
    "gemini-bad-flag": ("config_error", "Unknown arguments: such-flag, suchFlag"),
    "opencode-bad-flag": ("config_error", "opencode rejected its command line (it printed its "
                                          "usage"),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_failures_no_retry_fixes(name: str) -> None:
    _, verdict, _ = replay(name)
    status, words = RECORDED[name]
    assert verdict.status == status, verdict
    assert words in verdict.message
    assert "\n" not in verdict.message.strip()  # the loop shows one line


def feed(cli: str, *events: dict[str, Any], stderr: tuple[str, ...] = (),
         stderr_first: bool = False) -> OutputParser:
    parser = adapter_for(cli).parser()
    lines = [("stdout", json.dumps(event)) for event in events]
    errors = [("stderr", line) for line in stderr]
    for stream, line in (errors + lines if stderr_first else lines + errors):
        parser.feed_line(stream, line)
    return parser


def verdict(cli: str, exit_code: int, parser: OutputParser) -> tuple[str, str]:
    result = adapter_for(cli).classify(exit_code, parser)
    return result.status, result.message


# -- what the CLIs print that the recordings do not show -----------------------------------

@pytest.mark.parametrize(("cli", "code", "stderr", "message"), [
    ("codex", 2, ("error: invalid value 'bogus' for '--sandbox <SANDBOX_MODE>'",
                  "  [possible values: read-only, workspace-write, danger-full-access]"),
     "error: invalid value 'bogus' for '--sandbox <SANDBOX_MODE>'"),
    ("codex", 1, ("Error loading config.toml:",
                  "/home/u/.codex/config.toml:2:3: unquoted keys cannot be empty"),
     "Error loading config.toml: /home/u/.codex/config.toml:2:3: unquoted keys cannot be "
     "empty"),
    ("codex", 1, ("Error loading config.toml: unknown variant `bogus`, expected one of "
                  "`read-only`, `workspace-write`, `danger-full-access`", "in `sandbox_mode`"),
     "Error loading config.toml: unknown variant `bogus`"),
    ("claude", 1, ("error: option '--permission-mode <mode>' argument 'bogus' is invalid. "
                   "Allowed choices are acceptEdits, auto, bypassPermissions.",),
     "argument 'bogus' is invalid"),
    ("claude", 1, ("Error: Settings file not found: /p/settings.json",),
     "Settings file not found"),
    ("gemini", 1, ("Invalid values:",
                   '  Argument: approval-mode, Given: "bogus", Choices: "default", "yolo"',
                   "Usage: gemini [options] [command]"),
     'Invalid values: Argument: approval-mode, Given: "bogus"'),
    ("gemini", 1, ("Not enough arguments following: p",), "Not enough arguments following"),
    ("opencode", 1, ("\x1b[91m\x1b[1mError: \x1b[0mConfig file at OPENCODE_CONFIG_CONTENT is "
                     "not valid JSON(C): ", "--- JSONC Input ---"), "is not valid JSON(C)"),
])
def test_rejected_command_lines_and_config_files(cli: str, code: int, stderr: tuple[str, ...],
                                                 message: str) -> None:
    status, said = verdict(cli, code, feed(cli, stderr=stderr))
    assert status == "config_error"
    assert message in said


@pytest.mark.parametrize(("code", "stderr", "status", "message"), [
    (52, ("Error in /h/.gemini/settings.json: Expected property name or '}' in JSON at "
          "position 1", "Please fix the configuration file(s) and try again."),
     "config_error", "Error in /h/.gemini/settings.json"),
    (41, ("YOLO mode is enabled. All tool calls will be automatically approved.",
          "Invalid auth method selected."), "auth_error", "Invalid auth method selected."),
    (42, ("No input provided via stdin.",), "config_error", "No input provided via stdin."),
    (44, (), "config_error", "sandbox error"),
    (53, (), "error", "turn limit reached"),
])
def test_gemini_exit_codes_with_its_words(code: int, stderr: tuple[str, ...], status: str,
                                          message: str) -> None:
    said = verdict("gemini", code, feed("gemini", stderr=stderr))
    assert said[0] == status and message in said[1]


@pytest.mark.parametrize(("kind", "status"), [("authentication_failed", "auth_error"),
                                              ("oauth_org_not_allowed", "auth_error"),
                                              ("model_not_found", "config_error"),
                                              ("server_error", "error")])
def test_claude_says_what_kind_of_api_error_it_was(kind: str, status: str) -> None:
    parser = feed("claude",
                  {"type": "assistant", "error": kind, "message": {
                      "model": "<synthetic>", "content": [{"type": "text", "text": "failed"}]}},
                  {"type": "result", "subtype": "success", "is_error": True,
                   "api_error_status": None, "result": "failed"})
    assert verdict("claude", 1, parser)[0] == status


def test_opencode_model_error_in_its_log_wins_over_the_event_pointing_at_it() -> None:
    log = ('timestamp=2026-11-24T06:49:17.234Z level=ERROR run=1 message=failed ref=err_1 '
           'error="ProviderModelNotFoundError: Model not found: openai/gpt-5.1. Did you mean: '
           'gpt-5, gpt-5.6?" cause="ProviderModelNotFoundError: Model not found: openai/gpt-5.1.'
           ' Did you mean: gpt-5, gpt-5.6?\\n    at <anonymous>"')
    event = {"type": "error", "error": {"name": "UnknownError", "data": {
        "message": "Unexpected server error. Check server logs for details."}}}
    for stderr_first in (True, False):
        parser = feed("opencode", event, stderr=(log,), stderr_first=stderr_first)
        assert verdict("opencode", 1, parser) == (
            "config_error", "Model not found: openai/gpt-5.1. Did you mean: gpt-5, gpt-5.6?")


def test_opencode_servers_wrapped_model_error_is_read_whole() -> None:
    """`opencode serve` (the approvals bridge runs it) logs the error inside an Effect cause:
    the model's name stops at the wrapper's brackets."""
    log = ('level=ERROR message=failed cause="Cause([Die(ProviderModelNotFoundError: Model '
           'not found: fake/nope.)])"')
    event = {"type": "error", "error": {"name": "UnknownError", "data": {
        "message": "Unexpected server error. Check server logs for details."}}}
    parser = feed("opencode", event, stderr=(log,), stderr_first=True)
    assert verdict("opencode", 1, parser) == ("config_error", "Model not found: fake/nope.")


@pytest.mark.parametrize(("code", "status"), [(127, "config_error"), (126, "config_error"),
                                              (1, "error"), (2, "error")])
def test_the_command_adapter_knows_only_a_program_that_cannot_start(code: int,
                                                                    status: str) -> None:
    parser = adapter_for("command").parser()
    for line in ("running the agent", "sh: 1: my-agent: not found"):
        parser.feed_line("stderr", line)
    result = adapter_for("command").classify(code, parser)
    assert result.status == status
    if status == "config_error":
        assert result.message == "sh: 1: my-agent: not found"


# -- what must stay a plain error -----------------------------------------------------------

def test_a_plain_programs_words_never_make_a_config_error() -> None:
    """A command agent's output is its own business: a test it ran may reject an option."""
    parser = adapter_for("command").parser()
    for line in ("error: unknown option '--frobnicate'", "Unknown arguments: x",
                 "The model `m` does not exist", "Error loading config.toml: bad"):
        parser.feed_line("stderr", line)
        parser.feed_line("stdout", line)
    assert adapter_for("command").classify(1, parser).status == "error"


@pytest.mark.parametrize("cli", ["codex", "claude", "gemini", "opencode"])
def test_stderr_after_the_cli_started_is_no_rejected_command_line(cli: str) -> None:
    """Once a CLI prints its events it is running: "error: unknown option" on its stderr is
    something a tool printed, not the CLI refusing its command line."""
    starts: dict[str, dict[str, Any]] = {
        "codex": {"type": "thread.started", "thread_id": "t"},
        "claude": {"type": "system", "subtype": "init", "session_id": "s"},
        "gemini": {"type": "init", "session_id": "s", "model": "m"},
        "opencode": {"type": "step_start", "sessionID": "s", "part": {}}}
    parser = feed(cli, starts[cli], stderr=("error: unknown option '--frobnicate'",
                                      "Unknown arguments: x", "Invalid values:"))
    assert verdict(cli, 1, parser)[0] == "error"


@pytest.mark.parametrize(("cli", "events"), [
    # a tool's output naming a missing model is the project's business
    ("claude", [{"type": "user", "message": {"content": [
        {"type": "tool_result", "content": "ModelNotFoundError: model not found"}]}},
                {"type": "result", "subtype": "success", "is_error": True,
                 "api_error_status": 500, "result": "API Error: 500"}]),
    ("codex", [{"type": "item.completed", "item": {
        "type": "command_execution", "command": "pytest", "exit_code": 1, "status": "failed",
        "aggregated_output": "HTTP 404: the model `x` does not exist"}},
               {"type": "turn.failed", "error": {"message": "stream disconnected"}}]),
    # codex warns about a model it has no metadata for, then fails for another reason
    ("codex", [{"type": "item.completed", "item": {
        "type": "error", "message": "Model metadata for `m` not found. Defaulting to fallback "
                                    "metadata; this can degrade performance."}},
               {"type": "turn.failed", "error": {"message": "stream disconnected"}}]),
    # a 404 while codex tried WebSockets, before it fell back to HTTPS and then failed
    ("codex", [{"type": "error", "message": "Reconnecting... 2/5 (unexpected status 404 Not "
                                            "Found: no route, url: ws://127.0.0.1:1/v1)"},
               {"type": "turn.failed", "error": {"message": "unexpected status 500"}}]),
    # a bare 401 or "authentication" in an error is no sign
    ("opencode", [{"type": "error", "error": {"name": "UnknownError", "data": {
        "message": "authentication tests: 401 passed, 2 failed"}}}]),
])
def test_words_that_only_look_like_it_stay_a_plain_error(cli: str,
                                                         events: list[dict[str, Any]]) -> None:
    assert verdict(cli, 1, feed(cli, *events))[0] == "error"


def test_a_codex_404_it_recovered_from_does_not_fail_the_turn() -> None:
    parser = feed("codex", {"type": "error", "message": "Reconnecting... 1/5 (unexpected status "
                                                        "404 Not Found, url: ws://h/v1)"},
                  {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert verdict("codex", 0, parser)[0] == "ok"


def test_every_adapter_says_how_to_log_in() -> None:
    hints = {name: adapter.login_hint for name, adapter in ADAPTERS.items()}
    assert "codex login" in hints["codex"] and "CODEX_API_KEY" in hints["codex"]
    assert "claude auth login" in hints["claude"] and "ANTHROPIC_API_KEY" in hints["claude"]
    assert "GEMINI_API_KEY" in hints["gemini"]
    assert "opencode auth login" in hints["opencode"]
    assert "ralph.toml" in hints["command"]
    assert all("\n" not in hint for hint in hints.values())


# -- the fake model server answers an unknown model as the real APIs do ---------------------

@pytest.mark.parametrize(("protocol", "model", "error"), [
    ("responses", "gpt-5.5", {"message": "The model `gpt-5.5` does not exist or you do not "
                                         "have access to it.", "type": "invalid_request_error",
                              "param": None, "code": "model_not_found"}),
    ("chat", "fake-model", {"message": "The model `fake-model` does not exist or you do not "
                                       "have access to it.", "type": "invalid_request_error",
                            "param": None, "code": "model_not_found"}),
    ("anthropic", "claude-opus-5-5", {"type": "not_found_error",
                                      "message": "model: claude-opus-5-5"}),
    ("gemini", "gemini-2.5-flash", {
        "code": 404, "status": "NOT_FOUND", "details": [],
        "message": "models/gemini-2.5-flash is not found for API version v1beta, or is not "
                   "supported for generateContent. Call ListModels to see the list of "
                   "available models and their supported methods."}),
])
def test_the_fake_server_answers_an_unknown_model_as_the_api_does(
        protocol: str, model: str, error: dict[str, Any]) -> None:
    with fakellm_server({"rules": [{"name": "gone", "match": {"model": model},
                                    "reply": {"error": {"status": 404}}}]}) as server:
        response = send(server.url, protocol, [("user", "hi")])
    assert response.status == 404
    assert response.json["error"] == error
