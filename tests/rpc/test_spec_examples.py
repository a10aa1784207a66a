"""Every example of the JSON-RPC 2.0 specification (section 7), answered exactly.

Our error objects carry a `data` member the specification leaves to the server (the reason of a
-32600 or -32700, the unknown method of a -32601); otherwise each expected response is the
specification's, member for member. Batch responses are compared in any order, as the
specification allows.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.rpc.helpers import NO_VERSION, NOT_AN_OBJECT, SpecApi, decode, invalid


@pytest.fixture
def api() -> SpecApi:
    return SpecApi()


def _unordered(responses: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(response, sort_keys=True) for response in responses)


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
            {"jsonrpc": "2.0", "result": 19, "id": 1},
        ),
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
            {"jsonrpc": "2.0", "result": -19, "id": 2},
        ),
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, '
            '"id": 3}',
            {"jsonrpc": "2.0", "result": 19, "id": 3},
        ),
        (
            '{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, '
            '"id": 4}',
            {"jsonrpc": "2.0", "result": 19, "id": 4},
        ),
    ],
    ids=["positional", "positional-negative", "named", "named-reordered"],
)
async def test_calls(api: SpecApi, request_text: str, expected: dict[str, Any]) -> None:
    assert decode(await api.dispatcher.handle(request_text)) == expected


async def test_notifications_are_not_answered(api: SpecApi) -> None:
    assert await api.dispatcher.handle(
        '{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}'
    ) is None
    assert await api.dispatcher.handle('{"jsonrpc": "2.0", "method": "foobar"}') is None
    assert await api.dispatcher.handle(
        '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}'
    ) is None
    assert api.hellos == [7], "a known notification still runs"


async def test_non_existent_method(api: SpecApi) -> None:
    response = await api.dispatcher.handle('{"jsonrpc": "2.0", "method": "foobar", "id": "1"}')
    assert decode(response) == {
        "jsonrpc": "2.0",
        "error": {"code": -32601, "message": "Method not found", "data": {"method": "foobar"}},
        "id": "1",
    }


async def test_invalid_json(api: SpecApi) -> None:
    response = decode(
        await api.dispatcher.handle('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    )
    assert response["id"] is None
    assert response["error"]["code"] == -32700
    assert response["error"]["message"] == "Parse error"
    assert set(response) == {"jsonrpc", "id", "error"}
    assert response["jsonrpc"] == "2.0"


async def test_invalid_request_object(api: SpecApi) -> None:
    response = await api.dispatcher.handle('{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
    assert decode(response) == invalid("method must be a string")


async def test_batch_invalid_json(api: SpecApi) -> None:
    response = decode(
        await api.dispatcher.handle(
            '[\n  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},\n'
            '  {"jsonrpc": "2.0", "method"\n]'
        )
    )
    assert isinstance(response, dict), "a parse error is one object, not an array"
    assert (response["id"], response["error"]["code"], response["error"]["message"]) == (
        None,
        -32700,
        "Parse error",
    )


async def test_empty_array(api: SpecApi) -> None:
    assert decode(await api.dispatcher.handle("[]")) == invalid("a batch must not be empty")


async def test_invalid_batch_of_one(api: SpecApi) -> None:
    assert decode(await api.dispatcher.handle("[1]")) == [invalid(NOT_AN_OBJECT)]


async def test_invalid_batch(api: SpecApi) -> None:
    assert decode(await api.dispatcher.handle("[1,2,3]")) == [invalid(NOT_AN_OBJECT)] * 3


async def test_mixed_batch(api: SpecApi) -> None:
    response = decode(
        await api.dispatcher.handle(
            """[
            {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
            {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
            {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
            {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
            ]"""
        )
    )
    assert isinstance(response, list)
    assert _unordered(response) == _unordered(
        [
            {"jsonrpc": "2.0", "result": 7, "id": "1"},
            {"jsonrpc": "2.0", "result": 19, "id": "2"},
            invalid(NO_VERSION),
            {
                "jsonrpc": "2.0",
                "error": {
                    "code": -32601,
                    "message": "Method not found",
                    "data": {"method": "foo.get"},
                },
                "id": "5",
            },
            {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"},
        ]
    )
    assert api.hellos == [7]


async def test_all_notification_batch(api: SpecApi) -> None:
    response = await api.dispatcher.handle(
        """[
        {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
        ]"""
    )
    assert response is None
    assert api.hellos == [7]
