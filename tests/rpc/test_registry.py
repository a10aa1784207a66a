"""Registration rules, params binding and result writing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, Field

from ralph.rpc import Dispatcher, Registry
from tests.rpc.helpers import decode


class Item(BaseModel):
    item_id: int = Field(alias="itemId")
    label: str | None = None


class Query(BaseModel):
    max_items: int = Field(default=10, alias="maxItems")
    prefix: str = ""


def _registry() -> Registry:
    return Registry(title="t", version="1")


async def _result(registry: Registry, method: str, params: Any = None) -> Any:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": 1}
    if params is not None:
        message["params"] = params
    response = decode(await Dispatcher(registry).handle(json.dumps(message)))
    assert "error" not in response, response
    return response["result"]


def test_rpc_discover_is_registered_first() -> None:
    registry = _registry()

    @registry.method("ping")
    async def ping() -> bool:
        return True

    assert registry.names == ["rpc.discover", "ping"]


def test_names_are_unique_and_rpc_is_reserved() -> None:
    registry = _registry()

    @registry.method("ping")
    async def ping() -> None: ...

    with pytest.raises(ValueError, match="already registered"):
        registry.method("ping")(ping)
    with pytest.raises(ValueError, match="reserved"):
        registry.method("rpc.discover")
    with pytest.raises(ValueError, match="reserved"):
        registry.method("rpc.other")
    with pytest.raises(ValueError, match="needs a name"):
        registry.method("")


def test_handlers_must_be_async() -> None:
    def sync_handler() -> None: ...

    with pytest.raises(TypeError, match="async"):
        _registry().method("sync")(sync_handler)  # type: ignore[type-var]


def test_params_must_be_a_model() -> None:
    async def handler(params: Any) -> None: ...

    with pytest.raises(TypeError, match="pydantic model"):
        _registry().method("m", params=dict)(handler)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("positional", "message"),
    [
        (("nope",), "not a field"),
        (("max_items",), "not a field"),  # the wire name is the alias
        (("*prefix", "maxItems"), "only the last"),
        (("prefix", "prefix"), "repeat"),
    ],
)
def test_positional_names_are_checked(positional: tuple[str, ...], message: str) -> None:
    async def handler(params: Query) -> None: ...

    with pytest.raises(ValueError, match=message):
        _registry().method("m", params=Query, positional=positional)(handler)


def test_positional_needs_a_params_model() -> None:
    async def handler() -> None: ...

    with pytest.raises(ValueError, match="no params model"):
        _registry().method("m", positional=("a",))(handler)


async def test_params_by_name_by_position_and_defaults() -> None:
    registry = _registry()

    @registry.method("list", params=Query, positional=("maxItems", "prefix"))
    async def list_items(params: Query) -> dict[str, Any]:
        return {"max": params.max_items, "prefix": params.prefix}

    assert await _result(registry, "list", {"maxItems": 3}) == {"max": 3, "prefix": ""}
    assert await _result(registry, "list", [5, "a"]) == {"max": 5, "prefix": "a"}
    assert await _result(registry, "list", [5]) == {"max": 5, "prefix": ""}
    assert await _result(registry, "list", []) == {"max": 10, "prefix": ""}
    assert await _result(registry, "list") == {"max": 10, "prefix": ""}


async def test_rest_collects_the_remaining_positional_values() -> None:
    class Join(BaseModel):
        sep: str
        parts: list[str]

    registry = _registry()

    @registry.method("join", params=Join, result=str, positional=("sep", "*parts"))
    async def join(params: Join) -> str:
        return params.sep.join(params.parts)

    assert await _result(registry, "join", ["-", "a", "b", "c"]) == "a-b-c"
    assert await _result(registry, "join", ["-"]) == ""
    assert await _result(registry, "join", {"sep": "+", "parts": ["x", "y"]}) == "x+y"


async def test_model_results_are_written_by_alias_with_nulls() -> None:
    registry = _registry()

    @registry.method("items", result=list[Item])
    async def items() -> list[Item]:
        return [Item(itemId=1), Item(itemId=2, label="two")]

    assert await _result(registry, "items") == [
        {"itemId": 1, "label": None},
        {"itemId": 2, "label": "two"},
    ]


async def test_undeclared_results_are_written_as_json() -> None:
    registry = _registry()
    moment = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)

    @registry.method("mixed")
    async def mixed() -> dict[str, Any]:
        return {"item": Item(itemId=3), "at": moment, "ints": {1: "one"}}

    @registry.method("big")
    async def big() -> dict[str, Any]:
        return {"item": Item(itemId=3), "at": moment, "big": 2**80}

    assert await _result(registry, "mixed") == {
        "item": {"itemId": 3, "label": None},
        "at": "2024-05-06T07:08:09Z",
        "ints": {"1": "one"},
    }
    assert await _result(registry, "big") == {
        "item": {"itemId": 3, "label": None},
        "at": "2024-05-06T07:08:09Z",
        "big": 2**80,
    }


def test_notification_schemas_are_checked() -> None:
    registry = _registry()
    registry.notification_schema("event", Item)
    with pytest.raises(ValueError, match="already documented"):
        registry.notification_schema("event", Item)
    with pytest.raises(TypeError, match="pydantic model"):
        registry.notification_schema("other", dict)  # type: ignore[arg-type]


async def test_methods_registered_after_the_dispatcher_are_served() -> None:
    registry = _registry()
    dispatcher = Dispatcher(registry)

    @registry.method("late")
    async def late() -> str:
        return "here"

    response = await dispatcher.handle('{"jsonrpc":"2.0","method":"late","id":1}')
    assert decode(response)["result"] == "here"
