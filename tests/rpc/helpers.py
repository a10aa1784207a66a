"""The JSON-RPC 2.0 specification's example API, and helpers to read responses exactly."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ralph.rpc import Dispatcher, Registry


class SubtractParams(BaseModel):
    minuend: int
    subtrahend: int


class SumParams(BaseModel):
    values: list[int]


class HelloParams(BaseModel):
    value: int


class SpecApi:
    """subtract, sum, notify_hello and get_data as the specification's examples use them."""

    def __init__(self) -> None:
        self.registry = Registry(title="spec examples", version="1.0.0")
        self.hellos: list[int] = []
        registry = self.registry

        @registry.method(
            "subtract",
            params=SubtractParams,
            result=int,
            positional=("minuend", "subtrahend"),
        )
        async def subtract(params: SubtractParams) -> int:
            return params.minuend - params.subtrahend

        @registry.method("sum", params=SumParams, result=int, positional=("*values",))
        async def sum_(params: SumParams) -> int:
            return sum(params.values)

        @registry.method("notify_hello", params=HelloParams, positional=("value",))
        async def notify_hello(params: HelloParams) -> None:
            self.hellos.append(params.value)

        @registry.method("get_data")
        async def get_data() -> list[Any]:
            return ["hello", 5]

        self.dispatcher = Dispatcher(registry)


def decode(raw: bytes | None) -> Any:
    """A response as Python values, integers of any size exact (the standard library's reader)."""
    assert raw is not None, "expected a response, got none"
    assert b"\n" not in raw, "a response must not contain a raw newline"
    return json.loads(raw.decode("utf-8"))


def invalid(reason: str, request_id: Any = None) -> dict[str, Any]:
    """Our -32600 response: the specification's, with the reason in `data` (server-defined)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32600, "message": "Invalid Request", "data": {"reason": reason}},
    }


NOT_AN_OBJECT = "a batch element must be an object"
NO_VERSION = 'the request must have "jsonrpc": "2.0"'
