"""Dispatcher: one incoming JSON-RPC message in, the bytes to answer with (or None) out.

This is all of JSON-RPC 2.0 that does not depend on a transport: parsing, validation of the
request object, batches, notifications, params binding, calling the handler and turning every
failure into the right error object. Transports (NDJSON over stdio, WebSocket) only frame
messages and call `dispatch` or `handle`, so they all behave the same.

`dispatch` answers at once whatever needs no waiting (every error found before a handler
runs, and the methods registered with `sync=True`) and returns a coroutine only for an async
handler or a batch that holds one: a transport then needs no task, no future and no lock for
the common small request. `handle` is the same as one awaitable.

Neither raises (except CancelledError, which `handle` lets through so that a shutdown can
cancel a handler): a message that breaks a handler becomes -32603 on the wire and a traceback
in the log, never a dead connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Final, NamedTuple, TypeAlias

from ralph.errors import RalphError
from ralph.rpc.codes import (
    APPLICATION_ERROR,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from ralph.rpc.envelope import NULL_ID, encode_id, error_response, success_response
from ralph.rpc.errors import RpcError
from ralph.rpc.jsoncodec import DecodeError, loads
from ralph.rpc.method import ABSENT, Method, ParamsError
from ralph.rpc.registry import Registry

__all__ = ["Answer", "Dispatcher", "Pending", "invalid_request"]

Pending: TypeAlias = Coroutine[Any, Any, bytes | None]
"""The answer of a message whose handler must be awaited (in a task of the transport's)."""
Answer: TypeAlias = bytes | Pending | None
"""What `Dispatcher.dispatch` returns: the bytes to send, None for nothing, or a Pending."""



class _Call(NamedTuple):
    """An async handler to call: the method, its bound arguments, the id (None for a
    notification)."""

    method: Method
    args: tuple[Any, ...]
    id_json: bytes | None


_ID_TYPES: Final = frozenset({str, int, float, type(None)})
"""Allowed id types, compared with `type()` so that booleans (an int subclass) are refused."""
_PARAMS_TYPES: Final = frozenset({dict, list})
_BATCH_WORKERS: Final = 32
"""Most requests of one batch handled at the same time; bounds the tasks a batch creates."""


def invalid_request(id_json: bytes, reason: str) -> bytes:
    """A -32600 response whose `data.reason` says what is wrong with the request."""
    return error_response(id_json, INVALID_REQUEST, data={"reason": reason})


class Dispatcher:
    """Answers messages with the methods of a Registry (methods added later are seen too)."""

    def __init__(self, registry: Registry, *, log: logging.Logger | None = None) -> None:
        self._methods = registry.methods
        self._log = log or logging.getLogger("ralph.rpc")

    async def handle(self, raw: bytes | str) -> bytes | None:
        """One message (request, notification or batch) -> the response's bytes, or None.

        The response is compact UTF-8 JSON without raw newlines: an object, or one array for a
        batch. None when nothing is to be answered (a notification, a batch of only
        notifications).
        """
        answer = self.dispatch(raw)
        if answer is None or isinstance(answer, bytes):
            return answer
        return await answer

    def dispatch(self, raw: bytes | str) -> Answer:
        """`handle` without waiting where no wait is needed: the response's bytes, None for
        nothing to send, or a Pending (a coroutine) to await for the response.

        A Pending must be awaited (or closed): it is an async handler not yet started.
        """
        try:
            message = loads(raw)
        except DecodeError as exc:
            self._log.debug("rpc: parse error: %s", exc)
            return error_response(NULL_ID, PARSE_ERROR, data={"reason": str(exc)})
        if type(message) is dict:
            return self._one(message)
        if type(message) is list:
            return self._batch(message)
        return invalid_request(NULL_ID, "a message must be a request object or a batch (array)")

    def _batch(self, items: list[Any]) -> Answer:
        """Every element that needs no waiting is answered at once; a batch with none that
        waits is answered without a coroutine."""
        if not items:
            return invalid_request(NULL_ID, "a batch must not be empty")
        results: list[bytes | None] = [None] * len(items)
        calls: list[tuple[int, _Call]] = []
        for index, item in enumerate(items):
            if type(item) is not dict:
                results[index] = invalid_request(NULL_ID, "a batch element must be an object")
                continue
            prepared = self._prepare(item)
            if isinstance(prepared, _Call):
                calls.append((index, prepared))
            else:
                results[index] = prepared
        if calls:
            return self._await_batch(results, calls)
        return _join(results)

    async def _await_batch(
        self, results: list[bytes | None], calls: list[tuple[int, _Call]]
    ) -> bytes | None:
        """The elements whose handlers wait run concurrently, at most _BATCH_WORKERS at once;
        each handler's coroutine is made only when a worker gets to it."""
        if len(calls) == 1:
            index, call = calls[0]
            results[index] = await self._call(*call)
            return _join(results)
        queue = iter(calls)

        async def worker() -> None:
            for position, call in queue:
                results[position] = await self._call(*call)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(len(calls), _BATCH_WORKERS)):
                group.create_task(worker())
        return _join(results)

    def _one(self, message: dict[str, Any]) -> Answer:
        """A single request object at the top level."""
        prepared = self._prepare(message)
        if isinstance(prepared, _Call):
            return self._call(*prepared)
        return prepared

    def _prepare(self, message: dict[str, Any]) -> bytes | _Call | None:
        """A request object checked and bound: the answer when no handler has to be awaited
        (an error, a notification's None, a sync method's result), else the call to make."""
        request_id = message.get("id")
        if type(request_id) not in _ID_TYPES:
            return invalid_request(NULL_ID, "id must be a string, a number or null")
        id_json = encode_id(request_id)
        if message.get("jsonrpc") != "2.0":
            return invalid_request(id_json, 'the request must have "jsonrpc": "2.0"')
        name = message.get("method")
        if type(name) is not str:
            return invalid_request(id_json, "method must be a string")
        params = message.get("params", ABSENT)
        if params is not ABSENT and type(params) not in _PARAMS_TYPES:
            return invalid_request(id_json, "params must be an object or an array")
        wants_answer = "id" in message
        method = self._methods.get(name)
        if method is None:
            if not wants_answer:
                return None
            return error_response(id_json, METHOD_NOT_FOUND, data={"method": name})
        try:
            args = method.bind(params)
        except ParamsError as exc:
            if not wants_answer:
                self._log.debug("rpc: notification %s: invalid params: %s", name, exc.errors)
                return None
            return error_response(id_json, INVALID_PARAMS, data=exc.errors)
        if method.sync:
            return self._call_now(method, args, id_json if wants_answer else None)
        return _Call(method, args, id_json if wants_answer else None)

    def _call_now(
        self, method: Method, args: tuple[Any, ...], id_json: bytes | None
    ) -> bytes | None:
        """Run a sync handler; id_json None means a notification, which is never answered."""
        try:
            result = method.handler(*args)
            if id_json is None:
                return None
            return success_response(id_json, method.serialize(result))
        except Exception as exc:
            return self._failed(method, id_json, exc)

    async def _call(
        self, method: Method, args: tuple[Any, ...], id_json: bytes | None
    ) -> bytes | None:
        """Run an async handler; id_json None means a notification, which is never answered."""
        try:
            result = await method.handler(*args)
            if id_json is None:
                return None
            return success_response(id_json, method.serialize(result))
        except Exception as exc:
            return self._failed(method, id_json, exc)

    def _failed(self, method: Method, id_json: bytes | None, exc: Exception) -> bytes | None:
        """The error response for what a handler raised (or its result could not be written)."""
        if isinstance(exc, RpcError):
            if id_json is None:
                self._log.debug("rpc: notification %s: error %s", method.name, exc)
                return None
            return self._error(method, id_json, exc.code, exc.message, exc.data)
        if isinstance(exc, RalphError):
            self._log.info("rpc: %s: %s", method.name, exc)
            if id_json is None:
                return None
            return self._error(method, id_json, APPLICATION_ERROR, str(exc) or type(exc).__name__)
        self._log.error("rpc: %s failed", method.name, exc_info=exc)
        if id_json is None:
            return None
        return error_response(id_json, INTERNAL_ERROR)

    def _error(
        self, method: Method, id_json: bytes, code: int, message: str, data: Any = None
    ) -> bytes:
        try:
            return error_response(id_json, code, message, data)
        except ValueError:
            self._log.exception("rpc: %s: the error's data has no JSON form", method.name)
            return error_response(id_json, INTERNAL_ERROR)


def _join(results: list[bytes | None]) -> bytes | None:
    """A batch's answer: one array of the elements' responses, None when none has one."""
    answers = [result for result in results if result is not None]
    if not answers:
        return None
    return b"[" + b",".join(answers) + b"]"
