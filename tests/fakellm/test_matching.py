"""Choosing replies from the request's content: sequences, tool results, side calls, limits."""

from __future__ import annotations

import json

import pytest

from tests.fakellm.helpers import chat_body, decode, post, send

PROTOCOLS = ["responses", "chat", "anthropic", "gemini"]
TOOL = {"responses": "apply_patch", "chat": "write", "anthropic": "Write", "gemini": "write_file"}
SEQUENCE = {
    "rules": [{
        "name": "create",
        "match": {"user": "hello.txt"},
        "reply": {"write_file": {"path": "hello.txt", "content": "hello"}},
        "then": [{"text": "Done. EXIT_SIGNAL: true"}],
    }],
    "default": {"text": "side answer"},
}
PROMPT = "Please create hello.txt with hello in it"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sequence_across_turns(llm, protocol):
    server = llm(SEQUENCE)
    first = decode(protocol, send(server.url, protocol, [("user", PROMPT)]))
    assert [name for name, _ in first.calls] == [TOOL[protocol]]
    after_tool = [("user", PROMPT), ("call", TOOL[protocol]), ("result", "File written")]
    second = decode(protocol, send(server.url, protocol, after_tool))
    assert (second.text, second.calls) == ("Done. EXIT_SIGNAL: true", [])
    # a further turn in the same conversation repeats the last reply of the sequence
    more = [*after_tool, ("call", TOOL[protocol]), ("result", "again")]
    assert decode(protocol, send(server.url, protocol, more)).text == "Done. EXIT_SIGNAL: true"
    # the same request again gets the same answer: choice depends on content, not order
    again = decode(protocol, send(server.url, protocol, [("user", PROMPT)]))
    assert [name for name, _ in again.calls] == [TOOL[protocol]]
    # a new user message that does not match starts over with the default
    other = [*after_tool, ("text", "Done."), ("user", "thanks")]
    assert decode(protocol, send(server.url, protocol, other)).text == "side answer"
    assert [r.rule for r in server.requests] == ["create"] * 4 + ["default"]
    assert [r.last_is_tool_result for r in server.requests] == [False, True, True, False, False]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_matching_on_tool_results(llm, protocol):
    server = llm({"rules": [
        {"name": "failed", "match": {"tool_result": "ERROR"}, "reply": {"text": "saw error"}},
        {"name": "regex", "match": {"tool_result_regex": r"exit code \d+"},
         "reply": {"text": "saw exit code"}},
        {"name": "any", "match": {"tool_result": True}, "reply": {"text": "saw result"}},
        {"name": "start", "match": {"user": "go", "tool_result": False},
         "reply": {"shell": "ls"}},
    ]})
    start = decode(protocol, send(server.url, protocol, [("user", "go")]))
    assert len(start.calls) == 1
    base = [("user", "go"), ("call", start.calls[0][0])]
    assert decode(protocol, send(server.url, protocol, [*base, ("result", "ERROR: no")])).text \
        == "saw error"
    assert decode(protocol, send(server.url, protocol, [*base, ("result", "exit code 3")])).text \
        == "saw exit code"
    assert decode(protocol, send(server.url, protocol, [*base, ("result", "fine")])).text \
        == "saw result"
    assert [r.rule for r in server.requests] == ["start", "failed", "regex", "any"]
    assert "ERROR: no" in (server.requests[1].tool_result_text or "")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_last_user_message_not_earlier_ones(llm, protocol):
    server = llm({"rules": [{"match": {"user_regex": r"^first"}, "reply": {"text": "one"}}],
                  "default": {"text": "default"}})
    history = [("user", "first message"), ("text", "ok"), ("user", "second message")]
    assert decode(protocol, send(server.url, protocol, history)).text == "default"
    assert decode(protocol, send(server.url, protocol, history[:1])).text == "one"
    assert server.requests[0].last_user_text is not None
    assert "second message" in server.requests[0].last_user_text


def test_side_call_without_tools_gets_the_default(llm):
    """opencode's title call quotes the prompt but offers no tools: not the tool rule."""
    server = llm(SEQUENCE)
    title = chat_body([("user", "Generate a title for this conversation:\n"),
                       ("user", f'"{PROMPT}"')], tools=[])
    turn = decode("chat", post(server.url, "/v1/chat/completions", title))
    assert (turn.text, turn.calls) == ("side answer", [])
    main = decode("chat", send(server.url, "chat", [("user", PROMPT)]))
    assert [n for n, _ in main.calls] == ["write"]
    assert [r.rule for r in server.requests] == ["default", "create"]


def test_conditions_on_tools_protocol_and_model(llm):
    server = llm({"rules": [
        {"name": "no-tools", "match": {"has_tools": False}, "reply": {"text": "title"}},
        {"name": "claude", "match": {"protocol": "anthropic", "offers": "Bash"},
         "reply": {"text": "claude"}},
        {"name": "gemini", "match": {"model": "gemini-2.5"}, "reply": {"text": "gemini"}},
        {"name": "offers-missing", "match": {"offers": "Nope"}, "reply": {"text": "never"}},
    ], "default": {"text": "default"}})
    assert decode("chat", send(server.url, "chat", [("user", "x")], tools=[])).text == "title"
    assert decode("anthropic", send(server.url, "anthropic", [("user", "x")])).text == "claude"
    assert decode("gemini", send(server.url, "gemini", [("user", "x")])).text == "gemini"
    assert decode("responses", send(server.url, "responses", [("user", "x")])).text == "default"


def test_first_matching_rule_wins(llm):
    server = llm({"rules": [
        {"name": "a", "match": {"user": "x"}, "reply": {"text": "A"}},
        {"name": "b", "match": {"user": "x"}, "reply": {"text": "B"}},
    ]})
    assert decode("chat", send(server.url, "chat", [("user", "x")])).text == "A"


def test_times_limits_a_rule(llm):
    server = llm({"rules": [
        {"name": "once", "match": {"user": "x"}, "reply": {"text": "first"}, "times": 1},
        {"name": "after", "match": {"user": "x"}, "reply": {"text": "later"}},
    ]})
    texts = [decode("chat", send(server.url, "chat", [("user", "x")])).text for _ in range(3)]
    assert texts == ["first", "later", "later"]
    server.clear()
    assert server.requests == []
    assert decode("chat", send(server.url, "chat", [("user", "x")])).text == "first"


def test_usage_per_reply_rule_and_scenario(llm):
    server = llm({
        "usage": {"input_tokens": 10, "output_tokens": 2, "cached_tokens": 4},
        "rules": [
            {"name": "rule", "match": {"user": "r"}, "usage": {"input_tokens": 100},
             "reply": {"text": "a"}, "then": [{"text": "b", "usage": {"output_tokens": 7}}]},
        ],
    })
    scenario_level = send(server.url, "responses", [("user", "x")], stream=False).json
    assert scenario_level["usage"]["input_tokens"] == 10
    assert scenario_level["usage"]["input_tokens_details"]["cached_tokens"] == 4
    rule_level = decode("anthropic", send(server.url, "anthropic", [("user", "r")]))
    assert (rule_level.input_tokens, rule_level.output_tokens) == (100, 40)
    reply_level = decode("anthropic", send(
        server.url, "anthropic", [("user", "r"), ("call", "Bash"), ("result", "ok")]))
    assert (reply_level.input_tokens, reply_level.output_tokens) == (1200, 7)


def test_structured_side_call_gets_a_schema_shaped_default(llm):
    server = llm({"default": {"text": "plain"}})
    body = {
        "contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "object",
            "properties": {"reasoning": {"type": "string"},
                           "next_speaker": {"type": "string", "enum": ["user", "model"]}},
        }},
    }
    resp = post(server.url, "/v1beta/models/gemini-2.5-flash:generateContent", body)
    text = resp.json["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"reasoning": "OK", "next_speaker": "user"}


def test_cwd_from_the_request_makes_paths_absolute(llm):
    server = llm({"rules": [{"match": {"user": "go"},
                             "reply": {"write_file": {"path": "sub/x.txt", "content": "1"}}}]})
    turn = decode("anthropic", send(server.url, "anthropic", [("user", "go")]))
    assert turn.calls == [("Write", {"file_path": "/work/proj/sub/x.txt", "content": "1"})]
    absolute = llm({"rules": [{"match": {"user": "go"},
                               "reply": {"write_file": {"path": "/abs/y", "content": "2"}}}]})
    turn = decode("chat", send(absolute.url, "chat", [("user", "go")]))
    assert turn.calls == [("write", {"filePath": "/abs/y", "content": "2"})]
