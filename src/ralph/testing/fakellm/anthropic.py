"""Anthropic Messages API (`POST /v1/messages`), what claude speaks.

Streaming answers are SSE with `event:` lines (claude needs them): `message_start`,
`ping`, per block `content_block_start` / `content_block_delta` / `content_block_stop`
(a `tool_use` block starts with empty input and receives it as `input_json_delta`s:
claude ignores input placed in `content_block_start`), `message_delta` with the stop reason
and output tokens, `message_stop`. Errors are `{"type": "error", "error": {...}}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ralph.testing.fakellm.common import (
    ModelTurn,
    RequestView,
    ToolSpec,
    chunks,
    new_id,
    sse,
    text_of,
)
from ralph.testing.fakellm.scenario import ErrorSpec


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, dict)]
    return []


def _is_tool_result(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and any(
        block.get("type") == "tool_result" for block in _blocks(message.get("content"))
    )


def _user_text(message: dict[str, Any]) -> str:
    return "\n".join(
        str(block.get("text", "")) for block in _blocks(message.get("content"))
        if block.get("type") == "text"
    )


class AnthropicWire:
    name = "anthropic"

    def view(self, body: Any, stream_hint: bool) -> RequestView:
        data = body if isinstance(body, dict) else {}
        messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
        user_indexes = [
            i for i, m in enumerate(messages) if m.get("role") == "user" and not _is_tool_result(m)
        ]
        last_user = user_indexes[-1] if user_indexes else -1
        turns = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "assistant")
        last_is_result = bool(messages) and _is_tool_result(messages[-1])
        result_text = None
        if last_is_result:
            results = [b for b in _blocks(messages[-1].get("content"))
                       if b.get("type") == "tool_result"]
            result_text = "\n".join(text_of(b.get("content")) for b in results)
        tools = [
            ToolSpec(
                name=str(tool["name"]),
                schema=tool.get("input_schema") or {},
                description=str(tool.get("description", "")),
                kind="function" if "input_schema" in tool else "server",
            )
            for tool in data.get("tools") or []
            if isinstance(tool, dict) and tool.get("name")
        ]
        context = [text_of(data.get("system"))]
        # claude states its working directory in a `system` message inside `messages`
        context += [_user_text(m) for m in messages if m.get("role") in ("user", "system")]
        return RequestView(
            protocol=self.name,
            model=str(data.get("model", "")),
            stream=bool(data.get("stream", stream_hint)),
            last_user_text=_user_text(messages[last_user]) if last_user >= 0 else None,
            last_is_tool_result=last_is_result,
            tool_result_text=result_text,
            model_turns=turns,
            tools=tuple(tools),
            context_text="\n".join(context),
        )

    @staticmethod
    def _stop(turn: ModelTurn) -> str:
        return "tool_use" if turn.tool_calls else "end_turn"

    def _message(self, turn: ModelTurn, content: list[dict[str, Any]], *,
                 final: bool) -> dict[str, Any]:
        usage = turn.usage
        return {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": turn.model,
            "content": content,
            "stop_reason": self._stop(turn) if final else None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": usage.cached_tokens,
                "output_tokens": usage.output_tokens if final else 1,
                "service_tier": "standard",
            },
        }

    def body(self, turn: ModelTurn) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if turn.text is not None:
            content.append({"type": "text", "text": turn.text})
        content += [{"type": "tool_use", "id": call.call_id, "name": call.name,
                     "input": call.arguments} for call in turn.tool_calls]
        return self._message(turn, content, final=True)

    def events(self, turn: ModelTurn) -> Iterator[bytes]:
        def event(kind: str, payload: dict[str, Any]) -> bytes:
            return sse({"type": kind, **payload}, event=kind)

        yield event("message_start", {"message": self._message(turn, [], final=False)})
        yield event("ping", {})
        index = 0
        if turn.text is not None:
            yield event("content_block_start",
                        {"index": index, "content_block": {"type": "text", "text": ""}})
            for piece in chunks(turn.text):
                yield event("content_block_delta",
                            {"index": index, "delta": {"type": "text_delta", "text": piece}})
            yield event("content_block_stop", {"index": index})
            index += 1
        for call in turn.tool_calls:
            yield event(
                "content_block_start",
                {"index": index, "content_block": {"type": "tool_use", "id": call.call_id,
                                                   "name": call.name, "input": {}}},
            )
            encoded = json.dumps(call.arguments, ensure_ascii=False)
            cut = len(encoded) // 2
            for piece in (encoded[:cut], encoded[cut:]):
                yield event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
            yield event("content_block_stop", {"index": index})
            index += 1
        yield event(
            "message_delta",
            {"delta": {"stop_reason": self._stop(turn), "stop_sequence": None},
             "usage": {"output_tokens": turn.usage.output_tokens}},
        )
        yield event("message_stop", {})

    @staticmethod
    def _error_type(error: ErrorSpec) -> str:
        if error.type:
            return error.type
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(error.status, "api_error")

    def error_body(self, error: ErrorSpec) -> dict[str, Any]:
        return {
            "type": "error",
            # api.anthropic.com names an unknown model as "model: <name>"
            "error": {"type": self._error_type(error),
                      "message": f"model: {error.model}" if error.model_not_found
                      else error.text},
            "request_id": new_id("req_"),
        }

    def stream_error(self, error: ErrorSpec, model: str) -> Iterator[bytes]:
        yield sse(self.error_body(error), event="error")

    @staticmethod
    def count_tokens(body: Any) -> dict[str, Any]:
        """`/v1/messages/count_tokens`: about one token per four characters of the request."""
        return {"input_tokens": max(1, len(json.dumps(body)) // 4)}
