"""Errors (429 with Retry-After, 500, 401, in-stream), hangs, unknown paths, odd bodies."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time
from typing import Any

import pytest

from tests.fakellm.helpers import decode, post, request, send

PROTOCOLS = ["responses", "chat", "anthropic", "gemini"]


def _error_kind(protocol: str, body: dict[str, Any]) -> str:
    """The error's machine-readable kind as each protocol spells it."""
    if protocol in ("responses", "chat"):
        return str(body["error"]["code"])
    if protocol == "anthropic":
        assert body["type"] == "error"
        return str(body["error"]["type"])
    return str(body["error"]["status"])


RATE_LIMITED = {"responses": "rate_limit_exceeded", "chat": "rate_limit_exceeded",
                "anthropic": "rate_limit_error", "gemini": "RESOURCE_EXHAUSTED"}
UNAUTHORIZED = {"responses": "invalid_api_key", "chat": "invalid_api_key",
                "anthropic": "authentication_error", "gemini": "UNAUTHENTICATED"}
SERVER_ERROR = {"responses": "server_error", "chat": "server_error",
                "anthropic": "api_error", "gemini": "INTERNAL"}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_429_with_retry_after_n_times_then_success(llm, protocol, stream):
    server = llm({"rules": [
        {"name": "limited", "match": {"user": "go"},
         "reply": {"error": {"status": 429, "retry_after": 2, "times": 2}}},
        {"name": "ok", "match": {"user": "go"}, "reply": {"text": "finally"}},
    ]})
    for _ in range(2):
        resp = send(server.url, protocol, [("user", "go")], stream=stream)
        assert resp.status == 429
        assert resp.headers["retry-after"] == "2"
        assert resp.headers["content-type"] == "application/json"
        assert _error_kind(protocol, resp.json) == RATE_LIMITED[protocol]
        assert "try again in 2s" in json.dumps(resp.json)
    turn = decode(protocol, send(server.url, protocol, [("user", "go")], stream=stream),
                  stream=stream)
    assert turn.text == "finally"
    assert [(r.rule, r.status) for r in server.requests] == [
        ("limited", 429), ("limited", 429), ("ok", 200)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("status", "kinds"), [(401, UNAUTHORIZED), (500, SERVER_ERROR)])
def test_401_and_500(llm, protocol, status, kinds):
    server = llm({"rules": [{"reply": {"error": {"status": status, "message": "nope"}}}]})
    resp = send(server.url, protocol, [("user", "go")])
    assert resp.status == status
    assert "retry-after" not in resp.headers
    assert _error_kind(protocol, resp.json) == kinds[protocol]
    assert "nope" in json.dumps(resp.json)
    assert server.requests[0].reply == "error"


def test_gemini_429_carries_retry_info(llm):
    server = llm({"rules": [{"reply": {"error": {"status": 429, "retry_after": 1.5}}}]})
    details = send(server.url, "gemini", [("user", "go")]).json["error"]["details"]
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"} in details


def test_error_extra_headers_and_overrides(llm):
    server = llm({"rules": [{"reply": {"error": {
        "status": 429, "type": "usage_limit_reached", "code": "usage_limit_reached",
        "headers": {"anthropic-ratelimit-unified-status": "rejected"}}}}]})
    resp = send(server.url, "responses", [("user", "go")])
    assert resp.headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert resp.json["error"]["type"] == resp.json["error"]["code"] == "usage_limit_reached"


def test_in_stream_errors(llm):
    server = llm({"rules": [{"reply": {"error": {"status": 429, "in_stream": True,
                                                 "message": "slow down"}}}]})
    events = send(server.url, "responses", [("user", "go")]).events()
    assert events[-1][0] == "response.failed"
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "rate_limit_exceeded", "message": "slow down"}
    anthropic = send(server.url, "anthropic", [("user", "go")])
    assert anthropic.status == 200
    assert anthropic.events() == [("error", {"type": "error", "error": {
        "type": "rate_limit_error", "message": "slow down"},
        "request_id": anthropic.events()[0][1]["request_id"]})]
    chat = send(server.url, "chat", [("user", "go")]).events()
    assert chat[0][1]["error"]["code"] == "rate_limit_exceeded"
    gemini = send(server.url, "gemini", [("user", "go")]).events()
    assert gemini[0][1]["error"]["code"] == 429
    # a non-streaming request gets the HTTP error instead
    assert send(server.url, "chat", [("user", "go")], stream=False).status == 429


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_hang_times_out_the_client_and_others_are_still_served(llm, protocol):
    server = llm({"rules": [{"name": "hang", "match": {"user": "hang"}, "reply": {"hang": 30}}],
                  "default": {"text": "alive"}})
    started = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout)):
        send(server.url, protocol, [("user", "hang")], timeout=0.5)
    assert time.monotonic() - started < 5
    assert decode(protocol, send(server.url, protocol, [("user", "other")])).text == "alive"
    assert [r.reply for r in server.requests] == ["hang", "text"]
    assert server.requests[0].status == 0


def test_stop_does_not_wait_for_a_hung_request(llm):
    server = llm({"rules": [{"reply": {"hang": 60}}]})
    errors: list[BaseException] = []

    def client() -> None:
        try:
            send(server.url, "chat", [("user", "x")], timeout=30)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    server.wait_for(lambda r: r.reply == "hang", timeout=5)
    started = time.monotonic()
    server.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 5
    assert errors  # the connection was closed without an answer


def test_delay_before_answering(llm):
    server = llm({"rules": [{"reply": {"text": "late", "delay": 0.3}}]})
    started = time.monotonic()
    assert decode("chat", send(server.url, "chat", [("user", "x")])).text == "late"
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/@opencode-ai%2fplugin"),  # opencode's npm registry lookup
    ("GET", "/v1/models"),
    ("POST", "/v2/unknown"),
    ("GET", "/v1/chat/completions"),  # a model path, but not POST
])
def test_unknown_paths_are_404_json_and_logged(llm, method, path):
    server = llm({"default": {"text": "x"}})
    resp = request(server.url, method, path)
    assert resp.status == 404
    assert resp.json["error"]["type"] == "not_found"
    entry = server.requests[0]
    assert (entry.method, entry.path, entry.endpoint, entry.reply, entry.status, entry.rule) == (
        method, path.split("?")[0], "not_found", "not_found", 404, None)


def test_count_tokens(llm):
    server = llm({"rules": [{"reply": {"error": {"status": 500}}}]})  # never used for counting
    anthropic = post(server.url, "/v1/messages/count_tokens?beta=true",
                     {"model": "m", "messages": [{"role": "user", "content": "hello " * 50}]})
    assert anthropic.status == 200 and anthropic.json["input_tokens"] > 50
    gemini = post(server.url, "/v1beta/models/gemini-2.5-flash:countTokens",
                  {"contents": [{"parts": [{"text": "hi"}]}]})
    assert gemini.status == 200 and gemini.json["totalTokens"] > 0
    assert [r.endpoint for r in server.requests] == ["count_tokens", "count_tokens"]
    assert [r.rule for r in server.requests] == [None, None]


def test_body_that_is_not_json_gets_the_default(llm):
    server = llm({"default": {"text": "default"}})
    parts = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=5)
    conn.request("POST", "/v1/chat/completions", body=b"{not json",
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 200
    assert body["choices"][0]["message"]["content"] == "default"
    assert server.requests[0].body == "{not json"


def test_gzip_and_chunked_request_bodies(llm):
    server = llm({"rules": [{"match": {"user": "zipped"}, "reply": {"text": "unzipped"}}]})
    payload = json.dumps({"model": "m", "stream": False,
                          "messages": [{"role": "user", "content": "zipped"}]}).encode()
    parts = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=5)
    conn.request("POST", "/v1/chat/completions", body=gzip.compress(payload),
                 headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    resp = conn.getresponse()
    assert json.loads(resp.read())["choices"][0]["message"]["content"] == "unzipped"
    conn.request("POST", "/v1/chat/completions", body=iter([payload[:10], payload[10:]]),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    resp = conn.getresponse()
    assert json.loads(resp.read())["choices"][0]["message"]["content"] == "unzipped"
    conn.request("POST", "/v1/chat/completions", body=b"xx",
                 headers={"Content-Encoding": "br"})
    resp = conn.getresponse()
    assert resp.status == 400
    resp.read()
    conn.close()
    assert [r.reply for r in server.requests] == ["text", "text", "bad_request"]


def test_keep_alive_connection_serves_a_stream_then_more(llm):
    server = llm({"default": {"text": "again and again"}})
    parts = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(parts[0], int(parts[1]), timeout=5)
    for stream in (True, False, True):
        body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "x"}]}
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        data = resp.read()
        assert b"again" in data
    conn.close()


def test_http_1_0_stream_is_close_delimited(llm):
    server = llm({"default": {"text": "old client"}})
    parts = server.url.removeprefix("http://").split(":")
    body = json.dumps({"model": "m", "stream": True,
                       "messages": [{"role": "user", "content": "x"}]}).encode()
    with socket.create_connection((parts[0], int(parts[1])), timeout=5) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding" not in head
    assert rest.endswith(b"data: [DONE]\n\n")
