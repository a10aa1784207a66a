"""HTTP helpers and request builders shaped like the real CLIs' requests."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DATA = Path(__file__).parent / "data"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw)

    def events(self) -> list[tuple[str | None, Any]]:
        """The SSE events: (event name or None, parsed data or the raw data string)."""
        out: list[tuple[str | None, Any]] = []
        for block in self.raw.decode().split("\n\n"):
            if not block.strip():
                continue
            name = None
            data = []
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    data.append(line[len("data: "):])
            text = "\n".join(data)
            try:
                out.append((name, json.loads(text)))
            except ValueError:
                out.append((name, text))
        return out


def request(url: str, method: str, path: str, body: Any = None, *, timeout: float = 10,
            headers: dict[str, str] | None = None) -> Response:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=payload, headers=all_headers)
        resp = conn.getresponse()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def post(url: str, path: str, body: Any, **kwargs: Any) -> Response:
    return request(url, "POST", path, body, **kwargs)


def cli_tools(cli: str) -> list[dict[str, Any]]:
    """The tools array a real CLI sent (descriptions stripped), as its protocol spells it."""
    tools: list[dict[str, Any]] = json.loads((DATA / f"{cli}-tools.json").read_text())["tools"]
    return tools


# -- request bodies, one builder per protocol --------------------------------------------------
# `history` is a list of ("user", text) / ("call", name) / ("result", text) / ("text", text).


def responses_body(history: list[tuple[str, str]], *, tools: list[dict[str, Any]] | None = None,
                   stream: bool = True, cwd: str = "/work/proj") -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "You are a coding agent."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text",
             "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>"}]},
    ]
    for n, (kind, text) in enumerate(history):
        if kind == "user":
            items.append({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": text}]})
        elif kind == "call":
            items.append({"type": "function_call", "name": text, "arguments": "{}",
                          "call_id": f"call_{n}"})
        elif kind == "result":
            items.append({"type": "function_call_output", "call_id": f"call_{n - 1}",
                          "output": text})
        else:
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": text}]})
    return {"model": "gpt-5.5", "instructions": "", "input": items,
            "tools": cli_tools("codex") if tools is None else tools, "stream": stream}


def chat_body(history: list[tuple[str, str]], *, tools: list[dict[str, Any]] | None = None,
              stream: bool = True, cwd: str = "/work/proj") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": f"You are opencode.\n  Working directory: {cwd}\n"}
    ]
    for n, (kind, text) in enumerate(history):
        if kind == "user":
            messages.append({"role": "user", "content": text})
        elif kind == "call":
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": text, "arguments": "{}"}}]})
        elif kind == "result":
            messages.append({"role": "tool", "tool_call_id": f"call_{n - 1}", "content": text})
        else:
            messages.append({"role": "assistant", "content": text})
    body: dict[str, Any] = {"model": "fake-model", "messages": messages, "stream": stream,
                            "stream_options": {"include_usage": True}}
    chosen = cli_tools("opencode") if tools is None else tools
    if chosen:
        body["tools"] = chosen
    return body


def anthropic_body(history: list[tuple[str, str]], *,
                   tools: list[dict[str, Any]] | None = None, stream: bool = True,
                   cwd: str = "/work/proj") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [
            {"type": "text", "text": f"# Environment\n - Primary working directory: {cwd}\n"}]}
    ]
    for n, (kind, text) in enumerate(history):
        if kind == "user":
            messages.append({"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>context</system-reminder>"},
                {"type": "text", "text": text}]})
        elif kind == "call":
            messages.append({"role": "assistant", "content": [
                {"type": "tool_use", "id": f"toolu_{n}", "name": text, "input": {}}]})
        elif kind == "result":
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n - 1}", "content": text}]})
        else:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
    return {"model": "claude-opus-5-5", "max_tokens": 32000, "system": [
        {"type": "text", "text": "You are Claude Code."}], "messages": messages,
        "tools": cli_tools("claude") if tools is None else tools, "stream": stream}


def gemini_body(history: list[tuple[str, str]], *, tools: list[dict[str, Any]] | None = None,
                cwd: str = "/work/proj") -> dict[str, Any]:
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": f"<session_context>\n- **Workspace Directories:**"
                                            f"\n  - {cwd}\n</session_context>"}]},
    ]
    for kind, text in history:
        if kind == "user":
            contents.append({"role": "user", "parts": [{"text": text}]})
        elif kind == "call":
            contents.append({"role": "model", "parts": [
                {"functionCall": {"name": text, "args": {}}}]})
        elif kind == "result":
            contents.append({"role": "user", "parts": [
                {"functionResponse": {"name": "tool", "response": {"output": text}}}]})
        else:
            contents.append({"role": "model", "parts": [{"text": text}]})
    body: dict[str, Any] = {"contents": contents,
                            "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
                            "generationConfig": {"temperature": 1}}
    chosen = cli_tools("gemini") if tools is None else tools
    if chosen:
        body["tools"] = chosen
    return body


GEMINI_STREAM = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
GEMINI_GENERATE = "/v1beta/models/gemini-2.5-flash:generateContent"


def send(url: str, protocol: str, history: list[tuple[str, str]], *, stream: bool = True,
         tools: list[dict[str, Any]] | None = None, timeout: float = 10) -> Response:
    """One model request in `protocol`'s shape."""
    if protocol == "responses":
        return post(url, "/v1/responses", responses_body(history, tools=tools, stream=stream),
                    timeout=timeout)
    if protocol == "chat":
        return post(url, "/v1/chat/completions", chat_body(history, tools=tools, stream=stream),
                    timeout=timeout)
    if protocol == "anthropic":
        return post(url, "/v1/messages?beta=true",
                    anthropic_body(history, tools=tools, stream=stream), timeout=timeout)
    return post(url, GEMINI_STREAM if stream else GEMINI_GENERATE,
                gemini_body(history, tools=tools), timeout=timeout)


@dataclass
class Turn:
    """What a protocol answer said, decoded back: text, tool calls, usage."""

    text: str
    calls: list[tuple[str, Any]]  # (name, arguments as dict, or raw input for custom tools)
    input_tokens: int
    output_tokens: int


def decode(protocol: str, resp: Response, *, stream: bool = True) -> Turn:
    """Reassemble a turn from a streamed or whole answer the way a client would."""
    assert resp.status == 200, resp.raw
    if protocol == "responses":
        if stream:
            events = resp.events()
            kinds = [name for name, _ in events]
            assert kinds[0] == "response.created"
            assert kinds[-1] == "response.completed"
            done = [data["item"] for name, data in events if name == "response.output_item.done"]
            deltas = "".join(data["delta"] for name, data in events
                             if name == "response.output_text.delta")
            usage = events[-1][1]["response"]["usage"]
        else:
            body = resp.json
            done = body["output"]
            usage = body["usage"]
            deltas = None
        text = "".join(part["text"] for item in done if item["type"] == "message"
                       for part in item["content"])
        if deltas is not None:
            assert deltas == text
        calls: list[tuple[str, Any]] = []
        for item in done:
            if item["type"] == "function_call":
                calls.append((item["name"], json.loads(item["arguments"])))
            elif item["type"] == "custom_tool_call":
                calls.append((item["name"], item["input"]))
        return Turn(text, calls, usage["input_tokens"], usage["output_tokens"])
    if protocol == "chat":
        if stream:
            events = resp.events()
            assert events[-1] == (None, "[DONE]")
            chunks = [data for _, data in events[:-1]]
            assert chunks[-1]["choices"] == []
            usage = chunks[-1]["usage"]
            text = ""
            pending: dict[int, dict[str, str]] = {}
            for chunk in chunks[:-1]:
                delta = chunk["choices"][0]["delta"]
                text += delta.get("content") or ""
                for call in delta.get("tool_calls") or []:
                    entry = pending.setdefault(call["index"], {"name": "", "arguments": ""})
                    entry["name"] += call.get("function", {}).get("name", "")
                    entry["arguments"] += call.get("function", {}).get("arguments", "")
            assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "tool_calls")
            calls = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(pending.items())]
        else:
            body = resp.json
            message = body["choices"][0]["message"]
            text = message["content"] or ""
            calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                     for c in message.get("tool_calls") or []]
            usage = body["usage"]
        return Turn(text, calls, usage["prompt_tokens"], usage["completion_tokens"])
    if protocol == "anthropic":
        if stream:
            events = resp.events()
            names = [name for name, _ in events]
            assert names[0] == "message_start" and names[-1] == "message_stop"
            assert all(name == data["type"] for name, data in events)
            text = ""
            blocks: dict[int, dict[str, Any]] = {}
            for name, data in events:
                if name == "content_block_start":
                    block = data["content_block"]
                    if block["type"] == "tool_use":
                        assert block["input"] == {}  # claude ignores input given here
                    blocks[data["index"]] = {**block, "json": ""}
                elif name == "content_block_delta":
                    delta = data["delta"]
                    if delta["type"] == "text_delta":
                        text += delta["text"]
                    else:
                        blocks[data["index"]]["json"] += delta["partial_json"]
            calls = [(b["name"], json.loads(b["json"])) for _, b in sorted(blocks.items())
                     if b["type"] == "tool_use"]
            start_usage = events[0][1]["message"]["usage"]
            delta_usage = next(d for n, d in events if n == "message_delta")["usage"]
            return Turn(text, calls, start_usage["input_tokens"], delta_usage["output_tokens"])
        body = resp.json
        text = "".join(b["text"] for b in body["content"] if b["type"] == "text")
        calls = [(b["name"], b["input"]) for b in body["content"] if b["type"] == "tool_use"]
        return Turn(text, calls, body["usage"]["input_tokens"], body["usage"]["output_tokens"])
    chunks = [data for _, data in resp.events()] if stream else [resp.json]
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    usage = chunks[-1]["usageMetadata"]
    text = "".join(p.get("text", "") for p in parts)
    calls = [(p["functionCall"]["name"], p["functionCall"]["args"]) for p in parts
             if "functionCall" in p]
    return Turn(text, calls, usage["promptTokenCount"], usage["candidatesTokenCount"])
