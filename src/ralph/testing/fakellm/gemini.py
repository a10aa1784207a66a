"""Gemini API (`/v1beta/models/{model}:streamGenerateContent?alt=sse` and
`:generateContent`), what the gemini CLI speaks.

Streaming answers are data-only SSE `GenerateContentResponse`s: text parts, then a last
chunk with the `functionCall` parts, `finishReason: STOP` (gemini treats a stream without a
finish reason as broken and retries) and `usageMetadata`. Errors are Google RPC statuses
(`{"error": {"code", "message", "status", "details"}}`; a 429 carries a `RetryInfo`).
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

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _parts(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, dict):
        return []
    return [part for part in content.get("parts") or [] if isinstance(part, dict)]


def _is_result(content: Any) -> bool:
    return any("functionResponse" in part for part in _parts(content))


def _text(content: Any) -> str:
    return "\n".join(str(p["text"]) for p in _parts(content) if isinstance(p.get("text"), str))


class GeminiWire:
    name = "gemini"

    def view(self, body: Any, stream_hint: bool) -> RequestView:
        data = body if isinstance(body, dict) else {}
        contents = [c for c in data.get("contents") or [] if isinstance(c, dict)]
        users = [i for i, c in enumerate(contents)
                 if c.get("role", "user") == "user" and not _is_result(c)]
        last_user = users[-1] if users else -1
        turns = sum(1 for c in contents[last_user + 1 :] if c.get("role") == "model")
        last_is_result = bool(contents) and _is_result(contents[-1])
        result_text = None
        if last_is_result:
            responses = [p["functionResponse"] for p in _parts(contents[-1])
                         if isinstance(p.get("functionResponse"), dict)]
            result_text = "\n".join(
                json.dumps(r.get("response"), ensure_ascii=False) for r in responses
            )
        tools = []
        for group in data.get("tools") or []:
            if not isinstance(group, dict):
                continue
            for decl in group.get("functionDeclarations") or []:
                if isinstance(decl, dict) and decl.get("name"):
                    schema = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
                    tools.append(ToolSpec(name=str(decl["name"]), schema=schema,
                                          description=str(decl.get("description", ""))))
        config = data.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        context = [text_of(_parts(data.get("systemInstruction")))]
        context += [_text(c) for c in contents if c.get("role", "user") == "user"][:3]
        return RequestView(
            protocol=self.name,
            model="",
            stream=stream_hint,
            last_user_text=_text(contents[last_user]) if last_user >= 0 else None,
            last_is_tool_result=last_is_result,
            tool_result_text=result_text,
            model_turns=turns,
            tools=tuple(tools),
            context_text="\n".join(context),
            json_schema=schema if isinstance(schema, dict) else None,
        )

    @staticmethod
    def _usage(turn: ModelTurn) -> dict[str, Any]:
        usage = turn.usage
        meta = {
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens,
            "totalTokenCount": usage.total_tokens,
        }
        if usage.cached_tokens:
            meta["cachedContentTokenCount"] = usage.cached_tokens
        return meta

    def _chunk(self, turn: ModelTurn, parts: list[dict[str, Any]], response_id: str, *,
               final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        body: dict[str, Any] = {"candidates": [candidate], "modelVersion": turn.model,
                                "responseId": response_id}
        if final:
            candidate["finishReason"] = "STOP"
            body["usageMetadata"] = self._usage(turn)
        return body

    @staticmethod
    def _calls(turn: ModelTurn) -> list[dict[str, Any]]:
        return [{"functionCall": {"name": call.name, "args": call.arguments}}
                for call in turn.tool_calls]

    def body(self, turn: ModelTurn) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text is not None else []
        return self._chunk(turn, parts + self._calls(turn), new_id("gr-"), final=True)

    def events(self, turn: ModelTurn) -> Iterator[bytes]:
        response_id = new_id("gr-")
        pieces = chunks(turn.text) if turn.text else []
        last: list[dict[str, Any]] = self._calls(turn)
        if pieces and not last:
            last = [{"text": pieces.pop()}]
        for piece in pieces:
            yield sse(self._chunk(turn, [{"text": piece}], response_id, final=False))
        yield sse(self._chunk(turn, last, response_id, final=True))

    def error_body(self, error: ErrorSpec) -> dict[str, Any]:
        details: list[dict[str, Any]] = []
        if error.status in (401, 403):
            details.append({"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "API_KEY_INVALID", "domain": "googleapis.com"})
        if error.retry_after is not None:
            seconds = error.retry_after
            text = str(int(seconds)) if float(seconds).is_integer() else str(seconds)
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": f"{text}s"})
        text = error.text
        if error.model_not_found:  # as generativelanguage.googleapis.com answers it
            text = (f"models/{error.model} is not found for API version v1beta, or is not "
                    "supported for generateContent. Call ListModels to see the list of "
                    "available models and their supported methods.")
        return {"error": {
            "code": error.status,
            "message": text,
            "status": error.code or _STATUS.get(error.status, "UNKNOWN"),
            "details": details,
        }}

    def stream_error(self, error: ErrorSpec, model: str) -> Iterator[bytes]:
        yield sse(self.error_body(error))

    @staticmethod
    def count_tokens(body: Any) -> dict[str, Any]:
        return {"totalTokens": max(1, len(json.dumps(body)) // 4)}
