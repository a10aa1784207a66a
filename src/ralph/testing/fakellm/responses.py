"""OpenAI Responses API (`POST /v1/responses`), what codex speaks.

Streaming answers are SSE with `event:` and `data:` lines: `response.created`,
`response.in_progress`, per output item `response.output_item.added`, the text or
argument deltas and `response.output_item.done`, then `response.completed` with usage.
In-stream errors are `response.failed` with the error's `code` (`rate_limit_exceeded`, ...).
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
from ralph.testing.fakellm.scenario import ErrorSpec

_MODEL_ITEMS = {
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "reasoning",
    "web_search_call",
    "tool_search_call",
}
_RESULT_ITEMS = {
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "tool_search_output",
    "mcp_call_output",
}


def _kind(item: dict[str, Any]) -> str:
    """`user_message`, `model`, `result` or `other` for one input item."""
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role == "user":
            return "user_message"
        if role == "assistant":
            return "model"
        return "other"
    if kind in _MODEL_ITEMS:
        return "model"
    if kind in _RESULT_ITEMS:
        return "result"
    return "other"


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, dict):
        return text_of(output.get("content", output.get("text", "")))
    return text_of(output)


class ResponsesWire:
    name = "responses"

    def view(self, body: Any, stream_hint: bool) -> RequestView:
        data = body if isinstance(body, dict) else {}
        raw_input = data.get("input", [])
        items: list[dict[str, Any]] = (
            [{"type": "message", "role": "user", "content": raw_input}]
            if isinstance(raw_input, str)
            else [item for item in raw_input if isinstance(item, dict)]
            if isinstance(raw_input, list)
            else []
        )
        kinds = [_kind(item) for item in items]
        last_user = max((i for i, k in enumerate(kinds) if k == "user_message"), default=-1)
        turns = 0
        previous = ""
        for kind in kinds[last_user + 1 :]:
            if kind == "model" and previous != "model":
                turns += 1
            previous = kind
        last_is_result = bool(kinds) and kinds[-1] == "result"
        tools = []
        for tool in data.get("tools") or []:
            if not isinstance(tool, dict) or not tool.get("name"):
                continue
            tools.append(
                ToolSpec(
                    name=str(tool["name"]),
                    schema=tool.get("parameters") or {},
                    description=str(tool.get("description", "")),
                    kind=str(tool.get("type") or "function"),
                )
            )
        context = [str(data.get("instructions") or "")]
        context += [
            text_of(item.get("content"))
            for item, kind in zip(items, kinds, strict=True)
            if kind in ("user_message", "other") and item.get("type", "message") == "message"
        ]
        return RequestView(
            protocol=self.name,
            model=str(data.get("model", "")),
            stream=bool(data.get("stream", stream_hint)),
            last_user_text=text_of(items[last_user].get("content")) if last_user >= 0 else None,
            last_is_tool_result=last_is_result,
            tool_result_text=_output_text(items[-1]) if last_is_result else None,
            model_turns=turns,
            tools=tuple(tools),
            context_text="\n".join(context),
        )

    # -- answers -----------------------------------------------------------------------------

    def _items(self, turn: ModelTurn) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if turn.text is not None:
            items.append(
                {
                    "id": new_id("msg_"),
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        for call in turn.tool_calls:
            if call.kind == "custom":
                items.append(
                    {
                        "id": new_id("ctc_"),
                        "type": "custom_tool_call",
                        "status": "completed",
                        "call_id": call.call_id,
                        "name": call.name,
                        "input": call.raw_input or "",
                    }
                )
            else:
                items.append(
                    {
                        "id": new_id("fc_"),
                        "type": "function_call",
                        "status": "completed",
                        "call_id": call.call_id,
                        "name": call.name,
                        "arguments": call.arguments_json,
                    }
                )
        return items

    def _response(
        self, turn: ModelTurn, response_id: str, status: str, output: list[dict[str, Any]]
    ) -> dict[str, Any]:
        usage = turn.usage
        body: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": turn.model,
            "output": output,
            "error": None,
            "incomplete_details": None,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        if status == "completed":
            body["usage"] = {
                "input_tokens": usage.input_tokens,
                "input_tokens_details": {"cached_tokens": usage.cached_tokens},
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.total_tokens,
            }
        else:
            body["usage"] = None
        return body

    def body(self, turn: ModelTurn) -> dict[str, Any]:
        return self._response(turn, new_id("resp_"), "completed", self._items(turn))

    def events(self, turn: ModelTurn) -> Iterator[bytes]:
        response_id = new_id("resp_")
        seq = 0

        def event(kind: str, payload: dict[str, Any]) -> bytes:
            nonlocal seq
            seq += 1
            return sse({"type": kind, "sequence_number": seq, **payload}, event=kind)

        yield event(
            "response.created", {"response": self._response(turn, response_id, "in_progress", [])}
        )
        yield event(
            "response.in_progress",
            {"response": self._response(turn, response_id, "in_progress", [])},
        )
        items = self._items(turn)
        for index, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                yield event(
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "status": "in_progress",
                                                     "content": []}},
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                base = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield event("response.content_part.added", {**base, "part": part})
                for piece in chunks(text):
                    yield event("response.output_text.delta", {**base, "delta": piece})
                yield event("response.output_text.done", {**base, "text": text})
                yield event(
                    "response.content_part.done", {**base, "part": {**part, "text": text}}
                )
            elif item["type"] == "function_call":
                yield event(
                    "response.output_item.added",
                    {"output_index": index,
                     "item": {**item, "status": "in_progress", "arguments": ""}},
                )
                base = {"item_id": item["id"], "output_index": index}
                yield event(
                    "response.function_call_arguments.delta", {**base, "delta": item["arguments"]}
                )
                yield event(
                    "response.function_call_arguments.done",
                    {**base, "arguments": item["arguments"]},
                )
            else:
                yield event(
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "status": "in_progress",
                                                     "input": ""}},
                )
                yield event(
                    "response.custom_tool_call_input.delta",
                    {"item_id": item["id"], "output_index": index, "delta": item["input"]},
                )
            yield event("response.output_item.done", {"output_index": index, "item": item})
        yield event(
            "response.completed", {"response": self._response(turn, response_id, "completed",
                                                              items)}
        )

    # -- errors ------------------------------------------------------------------------------

    @staticmethod
    def _error_fields(error: ErrorSpec) -> dict[str, Any]:
        if error.status == 429:
            kind, code = "rate_limit_exceeded", "rate_limit_exceeded"
        elif error.status in (401, 403):
            kind, code = "invalid_request_error", "invalid_api_key"
        elif error.status >= 500:
            kind, code = "server_error", "server_error"
        elif error.model_not_found:
            kind, code = "invalid_request_error", "model_not_found"
        else:
            kind, code = "invalid_request_error", None
        # As api.openai.com answers an unknown model (Responses and Chat Completions alike).
        text = (f"The model `{error.model}` does not exist or you do not have access to it."
                if error.model_not_found else error.text)
        return {
            "message": text,
            "type": error.type or kind,
            "param": None,
            "code": error.code or code,
        }

    def error_body(self, error: ErrorSpec) -> dict[str, Any]:
        return {"error": self._error_fields(error)}

    def stream_error(self, error: ErrorSpec, model: str) -> Iterator[bytes]:
        response_id = new_id("resp_")
        base: dict[str, Any] = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "output": [],
            "usage": None,
        }
        yield sse(
            {"type": "response.created", "sequence_number": 1,
             "response": {**base, "status": "in_progress", "error": None}},
            event="response.created",
        )
        fields = self._error_fields(error)
        yield sse(
            {
                "type": "response.failed",
                "sequence_number": 2,
                "response": {
                    **base,
                    "status": "failed",
                    "error": {"code": fields["code"] or fields["type"],
                              "message": fields["message"]},
                },
            },
            event="response.failed",
        )
