"""What every protocol module shares: the normalized view of a request and the model's turn."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ralph.testing.fakellm.scenario import ErrorSpec, Usage


@dataclass(frozen=True)
class ToolSpec:
    """A tool the client offered: its name and the JSON schema of its arguments."""

    name: str
    schema: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    kind: str = "function"  # codex also offers "custom" (free-form) tools


@dataclass(frozen=True)
class RequestView:
    """A model request reduced to what rules match on, whatever its wire protocol."""

    protocol: str
    model: str = ""
    stream: bool = False
    last_user_text: str | None = None
    last_is_tool_result: bool = False
    tool_result_text: str | None = None
    model_turns: int = 0  # model turns since the last user message
    tools: tuple[ToolSpec, ...] = ()
    context_text: str = ""  # system prompt and early messages: where the client states its cwd
    json_schema: dict[str, Any] | None = None  # a structured-output request (gemini side calls)

    def tool(self, name: str) -> ToolSpec | None:
        for spec in self.tools:
            if spec.name == name:
                return spec
        return None

    @property
    def tool_names(self) -> list[str]:
        return [spec.name for spec in self.tools]


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: dict[str, Any]
    kind: str = "function"
    raw_input: str | None = None  # a custom tool's free-form input

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class ModelTurn:
    """What the fake model says in one turn: optional text, then tool calls."""

    text: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str


class Wire(Protocol):
    """One wire protocol: how to read a request and how to write a turn or an error."""

    name: str

    def view(self, body: Any, stream_hint: bool) -> RequestView: ...

    def body(self, turn: ModelTurn) -> dict[str, Any]: ...

    def events(self, turn: ModelTurn) -> Iterator[bytes]: ...

    def error_body(self, error: ErrorSpec) -> dict[str, Any]: ...

    def stream_error(self, error: ErrorSpec, model: str) -> Iterator[bytes]: ...


_counter = itertools.count(1)
_counter_lock = threading.Lock()


def new_id(prefix: str) -> str:
    """A unique, readable id: prefix, process-wide counter and a time fragment."""
    with _counter_lock:
        n = next(_counter)
    return f"{prefix}{int(time.time() * 1000) % 10**9:09d}{n:06d}"


def chunks(text: str, parts: int = 3) -> list[str]:
    """Split text into a few deltas at word boundaries (at least one, never empty pieces)."""
    if not text:
        return [""]
    words = re.findall(r"\S+\s*|\s+", text)
    size = max(1, -(-len(words) // parts))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; `data` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of parts with text fields."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict):
                value = part.get("text")
                if isinstance(value, str):
                    pieces.append(value)
                elif "content" in part:
                    pieces.append(text_of(part["content"]))
        return "\n".join(piece for piece in pieces if piece)
    if isinstance(content, dict):
        return text_of([content])
    return str(content)
