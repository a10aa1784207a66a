"""OpenAI Chat Completions (`POST /v1/chat/completions`), what opencode speaks.

Streaming answers are data-only SSE `chat.completion.chunk`s: the role, text deltas,
`tool_calls` deltas (id and name first, then the arguments), a chunk with the
`finish_reason`, a final chunk with `usage` and no choices, then `data: [DONE]`.
"""

from __future__ import annotations

import time
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
from ralph.testing.fakellm.responses import ResponsesWire
from ralph.testing.fakellm.scenario import ErrorSpec


class ChatWire:
    name = "chat"

    def view(self, body: Any, stream_hint: bool) -> RequestView:
        data = body if isinstance(body, dict) else {}
        messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
        roles = [str(m.get("role", "")) for m in messages]
        last_user = max((i for i, role in enumerate(roles) if role == "user"), default=-1)
        turns = sum(1 for role in roles[last_user + 1 :] if role == "assistant")
        last_is_result = bool(roles) and roles[-1] in ("tool", "function")
        tools = []
        for tool in data.get("tools") or []:
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and function.get("name"):
                tools.append(
                    ToolSpec(
                        name=str(function["name"]),
                        schema=function.get("parameters") or {},
                        description=str(function.get("description", "")),
                    )
                )
        context = [text_of(m.get("content")) for m in messages if m.get("role") in
                   ("system", "developer", "user")]
        schema = None
        response_format = data.get("response_format")
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema")
        return RequestView(
            protocol=self.name,
            model=str(data.get("model", "")),
            stream=bool(data.get("stream", stream_hint)),
            last_user_text=text_of(messages[last_user].get("content")) if last_user >= 0 else None,
            last_is_tool_result=last_is_result,
            tool_result_text=text_of(messages[-1].get("content")) if last_is_result else None,
            model_turns=turns,
            tools=tuple(tools),
            context_text="\n".join(context),
            json_schema=schema if isinstance(schema, dict) else None,
        )

    @staticmethod
    def _usage(turn: ModelTurn) -> dict[str, Any]:
        usage = turn.usage
        return {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    @staticmethod
    def _finish(turn: ModelTurn) -> str:
        return "tool_calls" if turn.tool_calls else "stop"

    def body(self, turn: ModelTurn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": call.call_id, "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments_json}}
                for call in turn.tool_calls
            ]
        return {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": turn.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(turn),
                         "logprobs": None}],
            "usage": self._usage(turn),
        }

    def events(self, turn: ModelTurn) -> Iterator[bytes]:
        base = {
            "id": new_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": turn.model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return sse({**base, "choices": [choice]})

        yield chunk({"role": "assistant", "content": ""})
        if turn.text:
            for piece in chunks(turn.text):
                yield chunk({"content": piece})
        for index, call in enumerate(turn.tool_calls):
            yield chunk({"tool_calls": [{"index": index, "id": call.call_id, "type": "function",
                                         "function": {"name": call.name, "arguments": ""}}]})
            yield chunk({"tool_calls": [{"index": index,
                                         "function": {"arguments": call.arguments_json}}]})
        yield chunk({}, self._finish(turn))
        yield sse({**base, "choices": [], "usage": self._usage(turn)})
        yield b"data: [DONE]\n\n"

    def error_body(self, error: ErrorSpec) -> dict[str, Any]:
        return ResponsesWire().error_body(error)

    def stream_error(self, error: ErrorSpec, model: str) -> Iterator[bytes]:
        yield sse(self.error_body(error))
