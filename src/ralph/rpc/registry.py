"""Registry: the methods a server offers and the notifications it sends, with their types.

The registry is the single description of an API: the dispatcher calls from it and the OpenRPC
document is generated from it, so the published schema and the behaviour cannot drift apart.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel

from ralph.rpc.method import Handler, Method, SyncHandler
from ralph.rpc.openrpc import DISCOVER, build_document

__all__ = ["DISCOVER", "NotificationSpec", "Registry"]

H = TypeVar("H", bound=Handler)
S = TypeVar("S", bound=SyncHandler)


@dataclass(frozen=True, slots=True)
class NotificationSpec:
    """A server-to-client notification, documented in the OpenRPC document only."""

    name: str
    params: type[BaseModel]
    summary: str


class Registry:
    """Methods by name, plus the info the OpenRPC document needs.

        registry = Registry(title="Ralph bridge", version="1.0.0")

        @registry.method("ping", result=PingResult)
        async def ping() -> PingResult: ...
    """

    def __init__(self, *, title: str, version: str, description: str = "") -> None:
        self.title = title
        self.version = version
        self.description = description
        self._methods: dict[str, Method] = {}
        self._notifications: dict[str, NotificationSpec] = {}
        self._document: dict[str, Any] | None = None
        self._add(
            Method(
                DISCOVER,
                self._discover,
                params=None,
                result=None,
                summary="The OpenRPC document describing this API.",
                description="",
                positional=(),
                errors=(),
                sync=True,
            )
        )

    @property
    def names(self) -> list[str]:
        """Every method name, `rpc.discover` included, in registration order."""
        return list(self._methods)

    @property
    def methods(self) -> dict[str, Method]:
        """Name -> Method; the dispatcher's lookup table (do not modify)."""
        return self._methods

    @property
    def notifications(self) -> list[NotificationSpec]:
        return list(self._notifications.values())

    @overload
    def method(
        self,
        name: str,
        *,
        params: type[BaseModel] | None = None,
        result: Any = None,
        summary: str = "",
        description: str = "",
        positional: tuple[str, ...] = (),
        errors: Sequence[tuple[int, str]] = (),
        sync: Literal[False] = False,
    ) -> Callable[[H], H]: ...

    @overload
    def method(
        self,
        name: str,
        *,
        params: type[BaseModel] | None = None,
        result: Any = None,
        summary: str = "",
        description: str = "",
        positional: tuple[str, ...] = (),
        errors: Sequence[tuple[int, str]] = (),
        sync: Literal[True],
    ) -> Callable[[S], S]: ...

    def method(
        self,
        name: str,
        *,
        params: type[BaseModel] | None = None,
        result: Any = None,
        summary: str = "",
        description: str = "",
        positional: tuple[str, ...] = (),
        errors: Sequence[tuple[int, str]] = (),
        sync: bool = False,
    ) -> Callable[[Any], Any]:
        """Register a handler (an async function) under `name`; the decorator returns it
        unchanged.

        `params`: the params model (the handler gets an instance); None: the handler takes no
        argument and the method accepts only absent params, `{}` or `[]`. `positional`: the
        wire names accepted, in order, when params is an array; a last name written `*name`
        takes the remaining values as a list. `result`: a model or any type pydantic's
        TypeAdapter understands, used to write the result (by alias, nothing excluded) and to
        document it; None leaves the result undeclared. `errors`: the application errors
        (code, message) the method may answer with, for the document.

        `sync=True` registers a plain (not async) function instead, for a handler that never
        waits: the transport calls it as the request is read, without a task, and may send
        its answer together with others answered in the same turn of the event loop. It
        blocks the loop while it runs, as an async handler that never awaits would.

        Raises ValueError for a taken or reserved (`rpc.`) name or a positional name that is
        not a field, TypeError for a handler that is not an async function (or, with `sync`,
        one that is).
        """
        if not name:
            raise ValueError("a method needs a name")
        if name.startswith("rpc."):
            raise ValueError(f"{name!r}: names starting with 'rpc.' are reserved")

        def register(handler: Any) -> Any:
            self._add(
                Method(
                    name,
                    handler,
                    params=params,
                    result=result,
                    summary=summary,
                    description=description,
                    positional=positional,
                    errors=errors,
                    sync=sync,
                )
            )
            return handler

        return register

    def notification_schema(self, name: str, params: type[BaseModel], summary: str = "") -> None:
        """Document a notification the server sends (OpenRPC extension `x-notifications`)."""
        if name in self._notifications:
            raise ValueError(f"notification {name!r} is already documented")
        if not (isinstance(params, type) and issubclass(params, BaseModel)):
            raise TypeError(f"params of notification {name!r} must be a pydantic model class")
        self._notifications[name] = NotificationSpec(name, params, summary)
        self._document = None

    def openrpc(self) -> dict[str, Any]:
        """The OpenRPC 1.x document (a copy: the caller may change it freely)."""
        return copy.deepcopy(self._cached_document())

    def _cached_document(self) -> dict[str, Any]:
        """Built on first use after a registration, then reused by every `rpc.discover`."""
        if self._document is None:
            self._document = build_document(self)
        return self._document

    def _add(self, method: Method) -> None:
        if method.name in self._methods:
            raise ValueError(f"method {method.name!r} is already registered")
        self._methods[method.name] = method
        self._document = None

    def _discover(self) -> dict[str, Any]:
        return self._cached_document()
