"""RpcError: how a handler answers with a JSON-RPC error instead of a result."""

from __future__ import annotations

from typing import Any

from ralph.errors import RalphError

__all__ = ["RpcError"]


class RpcError(RalphError):
    """Raised in a handler to answer with this exact `code`, `message` and `data`.

    Deriving from RalphError keeps the rule that every deliberate error is a RalphError; a
    handler that lets a plain RalphError escape is answered with -32000 and its message, and
    anything else with -32603 (see `ralph.rpc.dispatcher`).
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {self.message!r}, {self.data!r})"
