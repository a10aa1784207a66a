"""The request log: contents, helpers, the JSON-lines file, concurrency; the fixture helper."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ralph.testing.fakellm import FakeLLM, fakellm_server
from tests.fakellm.helpers import decode, post, request, send


def test_log_entry_contents(llm):
    server = llm({"rules": [{"name": "create", "match": {"user": "hello.txt"},
                             "reply": {"write_file": {"path": "hello.txt", "content": "hi"}}}]})
    before = time.time()
    send(server.url, "anthropic", [("user", "make hello.txt")])
    entry = server.requests[0]
    assert entry.method == "POST"
    assert entry.path == "/v1/messages"
    assert entry.query == {"beta": ["true"]}
    assert entry.protocol == "anthropic" and entry.endpoint == "messages"
    assert entry.stream is True
    assert entry.rule == "create" and entry.reply == "tool_call" and entry.status == 200
    assert entry.model == "claude-opus-5-5"
    assert "Write" in entry.tools and "Bash" in entry.tools
    assert entry.tool_calls == ("Write",)
    assert entry.last_user_text is not None and "make hello.txt" in entry.last_user_text
    assert entry.last_is_tool_result is False and entry.tool_result_text is None
    assert before <= entry.timestamp <= time.time()
    assert entry.body["model"] == "claude-opus-5-5"
    assert entry.headers["content-type"] == "application/json"
    assert entry.offers("Write") and not entry.offers("write")
    assert json.loads(json.dumps(entry.to_dict()))["rule"] == "create"


def test_secrets_in_headers_are_redacted(llm):
    server = llm({})
    for header in ("Authorization", "x-api-key", "x-goog-api-key"):
        post(server.url, "/v1/chat/completions", {"messages": []},
             headers={header: "sk-secret-value"})
    for entry in server.requests:
        assert "sk-secret-value" not in json.dumps(entry.to_dict())
        assert "<redacted>" in entry.headers.values()


def test_matching_helpers(llm):
    server = llm({"rules": [{"name": "r", "match": {"user": "go"}, "reply": {"shell": "ls"}}]})
    send(server.url, "chat", [("user", "go")])
    send(server.url, "gemini", [("user", "other")])
    request(server.url, "GET", "/nothing")
    assert server.offered("bash") and server.offered("run_shell_command")
    assert not server.offered("Bash")
    assert server.assert_offered("bash").protocol == "chat"
    with pytest.raises(AssertionError, match=r"no request offered tool 'Bash'; offered: \["):
        server.assert_offered("Bash")
    assert [r.protocol for r in server.matching(rule="r")] == ["chat"]
    assert [r.protocol for r in server.matching(rule="default")] == ["gemini"]
    assert len(server.matching(endpoint="not_found")) == 1
    assert len(server.matching(user="other", protocol="gemini", offers="glob")) == 1
    assert len(server.matching(reply="tool_call", path="/v1/chat/completions")) == 1
    assert server.wait_for(lambda r: r.protocol == "gemini", timeout=1).rule == "default"
    with pytest.raises(TimeoutError):
        server.wait_for(lambda r: r.protocol == "responses", timeout=0.1)


def test_log_file_has_one_json_line_per_request(tmp_path):
    log = tmp_path / "requests.jsonl"
    with fakellm_server({"default": {"text": "x"}}, log_path=log) as server:
        send(server.url, "responses", [("user", "a")])
        request(server.url, "GET", "/missing")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["path"], line["status"]) for line in lines] == [
        ("/v1/responses", 200), ("/missing", 404)]
    assert lines[0]["body"]["model"] == "gpt-5.5"


def test_concurrent_requests_are_all_logged(llm):
    server = llm({"default": {"text": "parallel"}})
    results: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        text = decode("chat", send(server.url, "chat", [("user", f"n{n}")])).text
        with lock:
            results.append(text)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == ["parallel"] * 20
    assert sorted(r.last_user_text or "" for r in server.requests) == sorted(
        f"n{n}" for n in range(20))


def test_lifecycle_and_url():
    server = FakeLLM({"default": {"text": "x"}})
    with pytest.raises(RuntimeError):
        _ = server.url
    with server:
        assert server.url.startswith("http://127.0.0.1:")
        assert server.v1_url == server.url + "/v1"
        assert server.port > 0
        assert server.start() is server  # starting twice is harmless
        send(server.url, "chat", [("user", "x")])
    server.stop()  # and so is stopping twice
    with pytest.raises(ValueError, match="loopback"):
        FakeLLM({}, host="0.0.0.0")


def test_fixed_port(llm):
    first = llm({})
    port = first.port
    first.stop()
    second = llm({}, port=port)
    assert second.url == f"http://127.0.0.1:{port}"
    assert send(second.url, "chat", [("user", "x")]).status == 200


def test_scenario_from_a_file(tmp_path, llm):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({"default": {"text": "from file"}}))
    server = llm(path)
    assert decode("chat", send(server.url, "chat", [("user", "x")])).text == "from file"
