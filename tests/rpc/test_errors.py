"""Every error path of the dispatcher, and ids of every allowed type echoed exactly."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from ralph.errors import RalphError
from ralph.rpc import (
    APPLICATION_ERROR,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RATE_LIMITED,
    Dispatcher,
    Registry,
    RpcError,
)
from tests.rpc.helpers import NO_VERSION, SpecApi, decode, invalid


class Busy(BaseModel):
    activeRunId: str


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    count: int = Field(ge=0)


class Big(BaseModel):
    n: int


class Report(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str | None
    run_id: str | None = Field(default=None, alias="runId")


def _registry() -> Registry:
    registry = Registry(title="errors", version="0")

    @registry.method("strict", params=Strict, result=int)
    async def strict(params: Strict) -> int:
        return params.count

    @registry.method("bare")
    async def bare() -> str:
        return "ok"

    @registry.method("boom")
    async def boom() -> None:
        raise ValueError("secret internals /home/someone/.token")

    @registry.method("busy", errors=[(APPLICATION_ERROR, "already running")])
    async def busy() -> None:
        raise RpcError(APPLICATION_ERROR, "a run is already active", Busy(activeRunId="r1"))

    @registry.method("limited")
    async def limited() -> None:
        raise RpcError(RATE_LIMITED, "Rate limited", {"retry_after_s": 3})

    @registry.method("odd_data")
    async def odd_data() -> None:
        raise RpcError(APPLICATION_ERROR, "data without a JSON form", object())

    @registry.method("refused")
    async def refused() -> None:
        raise RalphError("the PRD has no open task")

    @registry.method("wrong_result", result=int)
    async def wrong_result() -> str:
        return "not a number"

    @registry.method("report", result=Report)
    async def report() -> dict[str, Any]:
        return {"task_id": None}

    @registry.method("big", params=Big, positional=("n",))
    async def big(params: Big) -> dict[str, int]:
        return {"n": params.n, "next": params.n + 1}

    return registry


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher(_registry())


async def _call(dispatcher: Dispatcher, message: Any) -> Any:
    raw = message if isinstance(message, str | bytes) else json.dumps(message)
    return decode(await dispatcher.handle(raw))


def _request(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params is not None:
        message["params"] = params
    return message


@pytest.mark.parametrize("text", ["1", '"request"', "null", "true", "3.5"])
async def test_a_message_that_is_not_an_object(dispatcher: Dispatcher, text: str) -> None:
    assert await _call(dispatcher, text) == invalid(
        "a message must be a request object or a batch (array)"
    )


@pytest.mark.parametrize("version", [None, "1.0", 2.0, "2.0 ", ["2.0"]])
async def test_wrong_or_missing_version(dispatcher: Dispatcher, version: Any) -> None:
    message: dict[str, Any] = {"method": "bare", "id": 7}
    if version is not None:
        message["jsonrpc"] = version
    assert await _call(dispatcher, message) == invalid(NO_VERSION, 7)


@pytest.mark.parametrize("method", [None, 1, ["bare"], {"name": "bare"}, True])
async def test_method_not_a_string(dispatcher: Dispatcher, method: Any) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": "a"}
    if method is not None:
        message["method"] = method
    assert await _call(dispatcher, message) == invalid("method must be a string", "a")


@pytest.mark.parametrize("params", ["x", 1, None, True, 2.5])
async def test_params_neither_object_nor_array(dispatcher: Dispatcher, params: Any) -> None:
    message = {"jsonrpc": "2.0", "method": "bare", "id": 3, "params": params}
    assert await _call(dispatcher, message) == invalid("params must be an object or an array", 3)


@pytest.mark.parametrize("request_id", [True, False, {"a": 1}, [1]])
async def test_id_of_a_wrong_type_is_answered_with_null(
    dispatcher: Dispatcher, request_id: Any
) -> None:
    message = {"jsonrpc": "2.0", "method": "bare", "id": request_id}
    assert await _call(dispatcher, message) == invalid("id must be a string, a number or null")


async def test_an_invalid_request_without_id_is_still_answered(dispatcher: Dispatcher) -> None:
    assert await _call(dispatcher, {"jsonrpc": "1.0", "method": "bare"}) == invalid(NO_VERSION)


@pytest.mark.parametrize(
    "raw",
    [b"{", b'{"jsonrpc": "2.0",}', b"", b"   ", b"NaN", b"[1,]", b"{'a': 1}", b'"\\ud800"'],
)
async def test_unparsable_json(dispatcher: Dispatcher, raw: bytes) -> None:
    response = await _call(dispatcher, raw)
    assert response["id"] is None
    assert response["error"]["code"] == -32700
    assert response["error"]["message"] == "Parse error"
    assert isinstance(response["error"]["data"]["reason"], str)


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe",
        b'{"jsonrpc": "2.0", "method": "bare", "id": "\xc3\x28"}',
        "{\"jsonrpc\": \"2.0\", \"method\": \"bare\", \"id\": \"\ud800\"}",
    ],
    ids=["bytes", "bad-sequence-in-string", "lone-surrogate-str"],
)
async def test_input_that_is_not_utf8(dispatcher: Dispatcher, raw: bytes | str) -> None:
    response = await _call(dispatcher, raw)
    assert response["id"] is None
    assert response["error"] == {
        "code": -32700,
        "message": "Parse error",
        "data": {"reason": "the input is not valid UTF-8"},
    }


@pytest.mark.parametrize("method", ["nope", "rpc.nope", "", "Bare"])
async def test_unknown_method(dispatcher: Dispatcher, method: str) -> None:
    assert await _call(dispatcher, _request(method, request_id="x")) == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -32601, "message": "Method not found", "data": {"method": method}},
    }


async def test_invalid_params_list_every_field_error(dispatcher: Dispatcher) -> None:
    response = await _call(dispatcher, _request("strict", {"count": -1, "extra": True}))
    assert response["id"] == 1
    error = response["error"]
    assert (error["code"], error["message"]) == (INVALID_PARAMS, "Invalid params")
    by_loc = {tuple(entry["loc"]): entry for entry in error["data"]}
    assert set(by_loc) == {("name",), ("count",), ("extra",)}
    assert by_loc[("name",)]["type"] == "missing"
    assert by_loc[("count",)]["type"] == "greater_than_equal"
    assert by_loc[("extra",)]["type"] == "extra_forbidden"
    for entry in error["data"]:
        assert set(entry) == {"loc", "msg", "type"}
        assert entry["msg"]


async def test_params_by_position_where_the_method_takes_names_only(
    dispatcher: Dispatcher,
) -> None:
    response = await _call(dispatcher, _request("strict", ["a", 1]))
    assert response["error"]["code"] == INVALID_PARAMS
    assert response["error"]["data"] == [
        {"loc": [], "msg": "params must be given by name (an object)", "type": "by_name_only"}
    ]


async def test_positional_count_mismatch() -> None:
    api = SpecApi()
    too_many = decode(await api.dispatcher.handle(json.dumps(_request("subtract", [1, 2, 3]))))
    assert too_many["error"]["code"] == INVALID_PARAMS
    assert too_many["error"]["data"] == [
        {
            "loc": [],
            "msg": "expected at most 2 params by position, got 3",
            "type": "too_many_params",
        }
    ]
    too_few = decode(await api.dispatcher.handle(json.dumps(_request("subtract", [1]))))
    assert too_few["error"]["code"] == INVALID_PARAMS
    assert too_few["error"]["data"] == [
        {"loc": ["subtrahend"], "msg": "Field required", "type": "missing"}
    ]


@pytest.mark.parametrize("params", [{}, []])
async def test_a_method_without_params_accepts_empty_params(
    dispatcher: Dispatcher, params: Any
) -> None:
    message = {"jsonrpc": "2.0", "method": "bare", "id": 1, "params": params}
    assert await _call(dispatcher, message) == {"jsonrpc": "2.0", "id": 1, "result": "ok"}


@pytest.mark.parametrize("params", [{"a": 1}, [1]])
async def test_a_method_without_params_refuses_params(dispatcher: Dispatcher, params: Any) -> None:
    response = await _call(dispatcher, _request("bare", params))
    assert response["error"]["code"] == INVALID_PARAMS
    assert response["error"]["data"] == [
        {"loc": [], "msg": "this method takes no params", "type": "no_params"}
    ]


async def test_an_unexpected_exception_is_an_internal_error_without_details(
    dispatcher: Dispatcher, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="ralph.rpc")
    raw = await dispatcher.handle(json.dumps(_request("boom")))
    assert decode(raw) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
    }
    assert raw is not None
    assert b"secret" not in raw
    assert b"Traceback" not in raw
    assert "boom" in caplog.text
    assert "secret internals" in caplog.text, "the traceback goes to the log"
    assert any(record.exc_info for record in caplog.records)


async def test_rpc_error_carries_code_message_and_data(dispatcher: Dispatcher) -> None:
    assert await _call(dispatcher, _request("busy")) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": APPLICATION_ERROR,
            "message": "a run is already active",
            "data": {"activeRunId": "r1"},
        },
    }
    assert await _call(dispatcher, _request("limited")) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": RATE_LIMITED, "message": "Rate limited", "data": {"retry_after_s": 3}},
    }


async def test_rpc_error_with_data_that_has_no_json_form(dispatcher: Dispatcher) -> None:
    response = await _call(dispatcher, _request("odd_data"))
    assert response["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}


async def test_a_ralph_error_is_an_application_error(dispatcher: Dispatcher) -> None:
    response = await _call(dispatcher, _request("refused"))
    assert response["error"] == {"code": APPLICATION_ERROR, "message": "the PRD has no open task"}


async def test_a_result_of_the_wrong_type_is_an_internal_error(dispatcher: Dispatcher) -> None:
    response = await _call(dispatcher, _request("wrong_result"))
    assert response["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}


async def test_a_dict_result_is_written_as_the_declared_model(dispatcher: Dispatcher) -> None:
    response = await _call(dispatcher, _request("report"))
    assert response["result"] == {"task_id": None, "runId": None}, "by alias, nulls kept"


@pytest.mark.parametrize("method", ["boom", "busy", "refused", "strict", "nope", "wrong_result"])
async def test_failing_notifications_are_never_answered(
    dispatcher: Dispatcher, method: str
) -> None:
    assert await dispatcher.handle(json.dumps({"jsonrpc": "2.0", "method": method})) is None
    assert await dispatcher.handle(
        json.dumps({"jsonrpc": "2.0", "method": method, "params": {"bad": 1}})
    ) is None


@pytest.mark.parametrize(
    "id_text",
    [
        '"1"',
        '""',
        '"é😀 \\n \\" \\\\ \\u0000"',
        "0",
        "-1",
        "1.5",
        "-0.0",
        "1e300",
        "2.5e-300",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901234567890",
        "-123456789012345678901234567890123456789",
        "null",
    ],
)
@pytest.mark.parametrize("method", ["bare", "nope", "strict"])
async def test_ids_are_echoed_exactly(dispatcher: Dispatcher, id_text: str, method: str) -> None:
    raw = f'{{"jsonrpc": "2.0", "method": "{method}", "id": {id_text}}}'
    response = decode(await dispatcher.handle(raw.encode()))
    expected = json.loads(id_text)
    assert response["id"] == expected
    assert type(response["id"]) is type(expected)
    if isinstance(expected, int):
        assert f'"id":{id_text}'.encode() in (await dispatcher.handle(raw) or b"")


async def test_an_invalid_request_echoes_a_readable_id(dispatcher: Dispatcher) -> None:
    raw = '{"jsonrpc": "2.0", "method": 5, "id": 123456789012345678901234567890}'
    assert decode(await dispatcher.handle(raw)) == invalid(
        "method must be a string", 123456789012345678901234567890
    )


async def test_huge_integers_in_params_stay_exact(dispatcher: Dispatcher) -> None:
    huge = 2**100 + 1
    raw = f'{{"jsonrpc": "2.0", "method": "big", "params": [{huge}], "id": 1}}'
    response = decode(await dispatcher.handle(raw))
    assert response["result"] == {"n": huge, "next": huge + 1}


async def test_request_with_null_id_is_answered(dispatcher: Dispatcher) -> None:
    assert await _call(dispatcher, _request("bare", request_id=None)) == {
        "jsonrpc": "2.0",
        "id": None,
        "result": "ok",
    }
