"""Methods registered with sync=True: answered by `dispatch` at once, without a coroutine or a
task, with exactly the answers an async handler would give."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import warnings
from typing import Any

import pytest
from pydantic import BaseModel

from ralph.errors import RalphError
from ralph.rpc import (
    APPLICATION_ERROR,
    INTERNAL_ERROR,
    Connection,
    Dispatcher,
    RawJson,
    Registry,
    RpcError,
)
from tests.rpc.helpers import decode


class Echo(BaseModel):
    text: str


class Pong(BaseModel):
    ok: bool
    n: int


class Api:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = asyncio.Event()
        registry = Registry(title="sync", version="0")

        @registry.method("echo", params=Echo, result=str, positional=("text",), sync=True)
        def echo(params: Echo) -> str:
            self.calls.append(params.text)
            return params.text

        @registry.method("pong", result=Pong, sync=True)
        def pong() -> Pong:
            return Pong(ok=True, n=1)

        @registry.method("raw", result=Pong, sync=True)
        def raw() -> RawJson:
            return RawJson(b'{"ok":true,"n":2}')

        @registry.method("refused", sync=True)
        def refused() -> None:
            raise RpcError(APPLICATION_ERROR, "busy", {"activeRunId": "run_1"})

        @registry.method("ralph_error", sync=True)
        def ralph_error() -> None:
            raise RalphError("the loop said no")

        @registry.method("boom", sync=True)
        def boom() -> None:
            raise ValueError("internal detail")

        @registry.method("slow")
        async def slow() -> str:
            await self.release.wait()
            return "slow"

        self.dispatcher = Dispatcher(registry)


def _request(method: str, request_id: Any = 1, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def test_a_sync_method_is_answered_by_dispatch_itself() -> None:
    api = Api()
    answer = api.dispatcher.dispatch(_request("echo", 7, ["hi"]))
    assert isinstance(answer, bytes)
    assert decode(answer) == {"jsonrpc": "2.0", "id": 7, "result": "hi"}
    assert decode(api.dispatcher.dispatch(_request("pong"))) == {  # type: ignore[arg-type]
        "jsonrpc": "2.0", "id": 1, "result": {"ok": True, "n": 1}}


def test_a_raw_json_result_is_sent_as_it_is() -> None:
    answer = Api().dispatcher.dispatch(_request("raw"))
    assert answer == b'{"jsonrpc":"2.0","id":1,"result":{"ok":true,"n":2}}'


def test_errors_of_sync_handlers_are_those_of_async_ones(caplog: pytest.LogCaptureFixture) -> None:
    api = Api()
    refused = decode(api.dispatcher.dispatch(_request("refused")))  # type: ignore[arg-type]
    assert refused["error"] == {"code": APPLICATION_ERROR, "message": "busy",
                                "data": {"activeRunId": "run_1"}}
    said_no = decode(api.dispatcher.dispatch(_request("ralph_error")))  # type: ignore[arg-type]
    assert said_no["error"] == {"code": APPLICATION_ERROR, "message": "the loop said no"}
    with caplog.at_level(logging.ERROR, logger="ralph.rpc"):
        boom = decode(api.dispatcher.dispatch(_request("boom")))  # type: ignore[arg-type]
    assert boom["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}
    assert "internal detail" not in json.dumps(boom)
    assert any(record.exc_info for record in caplog.records), "the traceback is logged"


def test_a_notification_to_a_sync_method_runs_it_and_is_not_answered() -> None:
    api = Api()
    assert api.dispatcher.dispatch(_request("echo", None, {"text": "quiet"})) is None
    assert api.calls == ["quiet"]
    assert api.dispatcher.dispatch(_request("boom", None)) is None


def test_errors_found_before_any_handler_are_answered_at_once() -> None:
    dispatcher = Api().dispatcher
    for raw in (b"{", b"[]", b"3", _request("missing"), _request("echo", 1, {"nope": 1})):
        assert isinstance(dispatcher.dispatch(raw), bytes), raw


async def test_an_async_method_is_a_pending_coroutine() -> None:
    api = Api()
    pending = api.dispatcher.dispatch(_request("slow"))
    assert asyncio.iscoroutine(pending)
    api.release.set()
    assert decode(await pending) == {"jsonrpc": "2.0", "id": 1, "result": "slow"}


def test_a_batch_of_sync_methods_is_answered_at_once_in_order() -> None:
    api = Api()
    batch = b"[" + b",".join([_request("echo", 1, ["a"]), _request("echo", None, ["b"]),
                              b"3", _request("pong", 2)]) + b"]"
    answer = api.dispatcher.dispatch(batch)
    assert isinstance(answer, bytes)
    assert [item.get("id") for item in decode(answer)] == [1, None, 2]
    assert api.calls == ["a", "b"]


async def test_a_batch_with_an_async_method_waits_for_it_and_keeps_the_order() -> None:
    api = Api()
    batch = b"[" + b",".join([_request("slow", 1), _request("echo", 2, ["now"]),
                              _request("slow", 3)]) + b"]"
    pending = api.dispatcher.dispatch(batch)
    assert asyncio.iscoroutine(pending)
    assert api.calls == ["now"], "the sync element ran at once"
    api.release.set()
    assert [item["id"] for item in decode(await pending)] == [1, 2, 3]


async def test_handle_is_dispatch_awaited() -> None:
    api = Api()
    assert decode(await api.dispatcher.handle(_request("echo", 1, ["x"])))["result"] == "x"


async def test_the_connection_answers_a_sync_method_without_a_task() -> None:
    api = Api()
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    connection = Connection(api.dispatcher, send, max_in_flight=1)
    assert connection.start(_request("pong")) is not None
    assert connection.in_flight == 0
    assert connection.start(_request("slow", 2)) is None
    assert connection.in_flight == 1
    assert not connection.has_slot
    waiting = asyncio.create_task(connection.submit(_request("echo", 3, ["after"])))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiting.done(), "submit waits for a free slot, sync methods too"
    api.release.set()
    await asyncio.wait_for(waiting, 10)
    await connection.drain()
    assert sorted(decode(data)["id"] for data in sent) == [2, 3]


def test_a_sync_handler_must_be_a_plain_function() -> None:
    registry = Registry(title="t", version="0")

    async def handler() -> None: ...

    with pytest.raises(TypeError, match="plain function"):
        registry.method("x", sync=True)(handler)


async def test_a_request_cancelled_before_it_starts_leaves_no_unawaited_coroutine() -> None:
    api = Api()
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)

    connection = Connection(api.dispatcher, send)
    batch = b"[" + _request("slow", 1) + b"," + _request("slow", 2) + b"]"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert connection.start(_request("slow", 3)) is None
        assert connection.start(batch) is None
        connection.cancel()  # before either task took its first step
        await connection.drain()
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert sent == []
    assert connection.in_flight == 0 and connection.has_slot
