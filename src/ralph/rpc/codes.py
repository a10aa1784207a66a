"""JSON-RPC 2.0 error codes: the specification's and the stable application codes of ours.

Clients switch on these numbers, so they never change meaning. -32768..-32000 is reserved by
the specification; -32000 and -32001 are the application codes the bridge document fixes.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPLICATION_ERROR",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RATE_LIMITED",
    "STANDARD_MESSAGES",
]

PARSE_ERROR: Final = -32700
"""The message is not JSON (or not UTF-8): the id cannot be known, so it is answered with null."""
INVALID_REQUEST: Final = -32600
"""JSON, but not a request object (no `"jsonrpc": "2.0"`, method not a string, ...)."""
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
"""A bug on our side; the details go to the log, never to the wire."""
APPLICATION_ERROR: Final = -32000
"""A refusal the client can act on (e.g. "already running"), with details in `data`."""
RATE_LIMITED: Final = -32001

STANDARD_MESSAGES: Final[dict[int, str]] = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    APPLICATION_ERROR: "Application error",
    RATE_LIMITED: "Rate limited",
}
"""The specification's own wording, used when an error has no more specific message."""
