"""Each wire protocol, streaming and not: text replies and tool calls with the real CLIs' tools."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakellm.helpers import cli_tools, decode, send

PROTOCOLS = ["responses", "chat", "anthropic", "gemini"]
CLI = {"responses": "codex", "chat": "opencode", "anthropic": "claude", "gemini": "gemini"}
PROMPT = "Create hello.txt containing hello"


def _without(protocol: str, *names: str) -> list[dict[str, Any]]:
    """The CLI's real tools minus some (by name)."""
    tools = cli_tools(CLI[protocol])
    if protocol == "gemini":
        decls = [d for d in tools[0]["functionDeclarations"] if d["name"] not in names]
        return [{"functionDeclarations": decls}]
    if protocol == "chat":
        return [t for t in tools if t["function"]["name"] not in names]
    return [t for t in tools if t.get("name") not in names]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_text_reply(llm, protocol, stream):
    server = llm({
        "rules": [{"name": "greet", "match": {"user": "hi there"},
                   "reply": {"text": "Hello from the fake model, in a few words."},
                   "usage": {"input_tokens": 321, "output_tokens": 12}}],
    })
    turn = decode(protocol, send(server.url, protocol, [("user", "hi there")], stream=stream),
                  stream=stream)
    assert turn.text == "Hello from the fake model, in a few words."
    assert turn.calls == []
    assert (turn.input_tokens, turn.output_tokens) == (321, 12)
    assert server.requests[0].rule == "greet"
    assert server.requests[0].stream is stream
    assert server.requests[0].protocol == protocol


WRITE_CALLS = {
    "responses": ("apply_patch",
                  "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"),
    "chat": ("write", {"filePath": "/work/proj/hello.txt", "content": "hello"}),
    "anthropic": ("Write", {"file_path": "/work/proj/hello.txt", "content": "hello"}),
    "gemini": ("write_file", {"file_path": "hello.txt", "content": "hello"}),
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_write_file_uses_the_offered_file_tool(llm, protocol, stream):
    server = llm({"rules": [{"match": {"user": "hello.txt"},
                             "reply": {"write_file": {"path": "hello.txt", "content": "hello"}}}]})
    turn = decode(protocol, send(server.url, protocol, [("user", PROMPT)], stream=stream),
                  stream=stream)
    assert turn.calls == [WRITE_CALLS[protocol]]
    assert server.requests[0].tool_calls == (WRITE_CALLS[protocol][0],)


SHELL_WRITES = {
    "responses": ("exec_command", {"cmd": "printf '%s' hello > hello.txt"}),
    "chat": ("bash", {"command": "printf '%s' hello > hello.txt"}),
    "anthropic": ("Bash", {"command": "printf '%s' hello > hello.txt",
                           "description": "Run a command"}),
    "gemini": ("run_shell_command", {"command": "printf '%s' hello > hello.txt",
                                     "description": "Run a command"}),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_write_file_falls_back_to_the_shell_tool(llm, protocol):
    server = llm({"rules": [{"match": {"user": "hello.txt"},
                             "reply": {"write_file": {"path": "hello.txt", "content": "hello"}}}]})
    tools = _without(protocol, "apply_patch", "write", "Write", "write_file")
    turn = decode(protocol, send(server.url, protocol, [("user", PROMPT)], tools=tools))
    assert turn.calls == [SHELL_WRITES[protocol]]


SHELL_CALLS = {
    "responses": ("exec_command", {"cmd": "ls -la"}),
    "chat": ("bash", {"command": "ls -la"}),
    "anthropic": ("Bash", {"command": "ls -la", "description": "Run a command"}),
    "gemini": ("run_shell_command", {"command": "ls -la", "description": "Run a command"}),
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_shell_reply_uses_the_offered_shell_tool(llm, protocol, stream):
    server = llm({"rules": [{"match": {"user": "list"}, "reply": {"shell": "ls -la"}}]})
    turn = decode(protocol, send(server.url, protocol, [("user", "list the files")],
                                 stream=stream), stream=stream)
    assert turn.calls == [SHELL_CALLS[protocol]]


RAW_CALLS = {
    "responses": ("view_image", {"path": "a.png"}),
    "chat": ("glob", {"pattern": "*.py"}),
    "anthropic": ("Read", {"file_path": "/x"}),
    "gemini": ("glob", {"pattern": "*.py"}),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_raw_tool_call(llm, protocol):
    name, arguments = RAW_CALLS[protocol]
    server = llm({"rules": [{"match": {"user": "go"},
                             "reply": {"tool": {"name": name, "arguments": arguments},
                                       "text": "Let me look."}}]})
    turn = decode(protocol, send(server.url, protocol, [("user", "go")]))
    assert turn.calls == [(name, arguments)]
    assert turn.text == "Let me look."


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_raw_tool_call_of_a_tool_not_offered_falls_through(llm, protocol):
    server = llm({"rules": [{"match": {"user": "go"},
                             "reply": {"tool": {"name": "NoSuchTool", "arguments": {}}}}],
                  "default": {"text": "fallback"}})
    turn = decode(protocol, send(server.url, protocol, [("user", "go")]))
    assert (turn.text, turn.calls) == ("fallback", [])
    assert server.requests[0].rule == "default"


def test_codex_custom_tool_streams_its_input(llm):
    server = llm({"rules": [{"match": {"user": "hello.txt"},
                             "reply": {"write_file": {"path": "a/b.txt", "content": "x\ny"}}}]})
    resp = send(server.url, "responses", [("user", PROMPT)])
    events = resp.events()
    added = next(d for n, d in events if n == "response.output_item.added")
    assert added["item"]["type"] == "custom_tool_call"
    delta = next(d for n, d in events if n == "response.custom_tool_call_input.delta")
    assert delta["delta"] == "*** Begin Patch\n*** Add File: a/b.txt\n+x\n+y\n*** End Patch\n"
    seqs = [d["sequence_number"] for _, d in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_anthropic_tool_input_arrives_as_json_deltas(llm):
    server = llm({"rules": [{"match": {"user": "hello.txt"},
                             "reply": {"write_file": {"path": "hello.txt", "content": "hello"}}}]})
    events = send(server.url, "anthropic", [("user", PROMPT)]).events()
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    assert deltas and all(d["type"] == "input_json_delta" for d in deltas)
    stop = next(d for n, d in events if n == "message_delta")
    assert stop["delta"]["stop_reason"] == "tool_use"


def test_chat_stream_ends_with_usage_then_done(llm):
    server = llm({"default": {"text": "ok"}})
    events = send(server.url, "chat", [("user", "x")]).events()
    assert events[-1] == (None, "[DONE]")
    assert events[-2][1]["choices"] == [] and events[-2][1]["usage"]["total_tokens"] == 1240
    assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"


def test_gemini_stream_has_a_finish_reason_and_model_from_the_path(llm):
    server = llm({"default": {"text": "one two three four five six"}})
    events = send(server.url, "gemini", [("user", "x")]).events()
    assert len(events) > 1
    assert all("finishReason" not in d["candidates"][0] for _, d in events[:-1])
    assert events[-1][1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1][1]["modelVersion"] == "gemini-2.5-flash"
    assert server.requests[0].model == "gemini-2.5-flash"


def test_responses_text_events_in_order(llm):
    server = llm({"default": {"text": "all good here"}})
    names = [n for n, _ in send(server.url, "responses", [("user", "x")]).events()]
    assert names == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed",
    ]
