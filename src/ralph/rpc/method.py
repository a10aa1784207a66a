"""One registered method: its handler, how its params are bound, how its result is written.

Everything that can be decided once is decided at registration: the params model's validator,
the names taken by position, the result's serializer (a pydantic TypeAdapter). A call then
costs one dict lookup, one validation (none for a method without params) and one dump.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from ralph.rpc.jsoncodec import dumps

__all__ = ["ABSENT", "Handler", "Method", "ParamsError", "RawJson", "SyncHandler", "wire_names"]

Handler = Callable[..., Awaitable[Any]]
"""`async def handler(params: Model) -> result`; `async def handler() -> result` without params."""
SyncHandler = Callable[..., Any]
"""`def handler(...) -> result`: a handler that never waits, registered with `sync=True`."""


class RawJson(bytes):
    """A result already encoded as compact UTF-8 JSON without raw newlines, sent as it is.

    For a hot method whose answer is mostly constant (ping: everything but the time): the
    handler encodes the constant part once, with the method's own serializer, so what it
    returns still matches the declared result; nothing checks it again on the way out.
    """

    __slots__ = ()


ABSENT: Final[Any] = object()
"""Stands for a request without a `params` member (which is not the same as `null`)."""


class ParamsError(Exception):
    """The params do not fit the method; `errors` become the -32602 response's `data`."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors[0]["msg"] if errors else "invalid params")
        self.errors = errors


def _error(msg: str, kind: str) -> list[dict[str, Any]]:
    return [{"loc": [], "msg": msg, "type": kind}]


def wire_names(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> the key a client sends (the field's alias, if it has one)."""
    names: dict[str, str] = {}
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
        names[name] = alias or name
    return names


class Method:
    """A method of a Registry; `bind` and `serialize` are the dispatcher's hot path."""

    __slots__ = (
        "description",
        "errors",
        "fixed",
        "handler",
        "name",
        "params",
        "positional",
        "rest",
        "result",
        "result_adapter",
        "serialize",
        "summary",
        "sync",
    )

    def __init__(
        self,
        name: str,
        handler: Handler | SyncHandler,
        *,
        params: type[BaseModel] | None,
        result: Any,
        summary: str,
        description: str,
        positional: tuple[str, ...],
        errors: Sequence[tuple[int, str]],
        sync: bool = False,
    ) -> None:
        if sync:
            if not callable(handler) or inspect.iscoroutinefunction(handler):
                raise TypeError(f"the sync handler of {name!r} must be a plain function")
        elif not inspect.iscoroutinefunction(handler):
            raise TypeError(f"the handler of {name!r} must be an async function")
        if params is not None and not (isinstance(params, type) and issubclass(params, BaseModel)):
            raise TypeError(f"params of {name!r} must be a pydantic model class")
        self.name = name
        self.handler: Callable[..., Any] = handler
        self.sync = sync
        """The handler is a plain function: called without a task, its result ready at once."""
        self.params = params
        self.result = result
        self.summary = summary
        self.description = description
        self.positional = positional
        self.errors = tuple((int(code), str(message)) for code, message in errors)
        self.fixed, self.rest = _split_positional(name, params, positional)
        self.result_adapter: TypeAdapter[Any] | None = (
            None if result is None else TypeAdapter(result)
        )
        self.serialize: Callable[[Any], bytes] = (
            _dumps if self.result_adapter is None else _adapter_serializer(self.result_adapter)
        )

    def bind(self, params: Any) -> tuple[Any, ...]:
        """The handler's arguments from a request's params (ABSENT, a dict or a list).

        Raises ParamsError with one entry per problem (pydantic's loc, msg and type).
        """
        model = self.params
        if model is None:
            if params is ABSENT or not params:
                return ()
            raise ParamsError(_error("this method takes no params", "no_params"))
        if params is ABSENT:
            params = {}
        elif type(params) is list:
            params = self._by_position(params)
        try:
            return (model.model_validate(params),)
        except ValidationError as exc:
            raise ParamsError(
                [
                    {"loc": list(err["loc"]), "msg": err["msg"], "type": err["type"]}
                    for err in exc.errors(
                        include_url=False, include_context=False, include_input=False
                    )
                ]
            ) from None

    def _by_position(self, values: list[Any]) -> dict[str, Any]:
        fixed = self.fixed
        if not fixed and self.rest is None:
            raise ParamsError(_error("params must be given by name (an object)", "by_name_only"))
        if len(values) > len(fixed) and self.rest is None:
            raise ParamsError(
                _error(
                    f"expected at most {len(fixed)} params by position, got {len(values)}",
                    "too_many_params",
                )
            )
        named = dict(zip(fixed, values, strict=False))
        if self.rest is not None:
            named[self.rest] = values[len(fixed) :]
        return named


def _split_positional(
    name: str, params: type[BaseModel] | None, positional: tuple[str, ...]
) -> tuple[tuple[str, ...], str | None]:
    """Check `positional` against the model: (fixed wire names, the `*rest` wire name or None)."""
    if not positional:
        return (), None
    if params is None:
        raise ValueError(f"{name!r} has no params model, so nothing can be positional")
    known = set(wire_names(params).values())
    bare = [entry.removeprefix("*") for entry in positional]
    for index, (entry, key) in enumerate(zip(positional, bare, strict=True)):
        if key not in known:
            raise ValueError(f"{name!r}: positional {key!r} is not a field of {params.__name__}")
        if entry.startswith("*") and index != len(positional) - 1:
            raise ValueError(f"{name!r}: only the last positional name may collect the rest (*)")
    if len(set(bare)) != len(bare):
        raise ValueError(f"{name!r}: positional names repeat")
    if positional[-1].startswith("*"):
        return tuple(bare[:-1]), bare[-1]
    return tuple(bare), None


def _adapter_serializer(adapter: TypeAdapter[Any]) -> Callable[[Any], bytes]:
    """Write a value of the declared type; anything else (a dict for a model) is validated first.

    The fast path is one pydantic-core dump. A value that is not of the declared type (a
    handler returning a dict for a model result) is validated into it, so the wire always
    matches the schema published in the OpenRPC document; a value that does not fit is a bug
    in the handler and raises (-32603).
    """

    to_json = adapter.serializer.to_json  # what dump_json calls, minus its wrapper

    def serialize(value: Any) -> bytes:
        if type(value) is RawJson:
            return value
        try:
            return to_json(value, by_alias=True, warnings="error")
        except PydanticSerializationError:
            return to_json(adapter.validate_python(value), by_alias=True)

    return serialize


def _dumps(value: Any) -> bytes:
    """An undeclared result: written as JSON as it is (a RawJson as it was encoded)."""
    if type(value) is RawJson:
        return value
    return dumps(value)
