"""The bytes of outgoing messages: responses, error responses and notifications.

Responses are assembled from pre-encoded pieces (`id` and `result` JSON) rather than by
encoding a dict, so that the result is encoded once, by the method's own serializer, and the
hot path does no more than join a few byte strings.
"""

from __future__ import annotations

from typing import Any

from ralph.rpc.codes import STANDARD_MESSAGES
from ralph.rpc.jsoncodec import dumps

__all__ = ["NULL_ID", "encode_id", "error_response", "notification", "success_response"]

NULL_ID = b"null"
"""The id of a response to a message whose id could not be read."""

_HEAD = b'{"jsonrpc":"2.0","id":'
_RESULT = b',"result":'
_ERROR = b',"error":'
_TAIL = b"}"


def encode_id(request_id: str | int | float | None) -> bytes:
    """The id's JSON, exactly as it will be echoed (any size of integer)."""
    return dumps(request_id)


def success_response(id_json: bytes, result_json: bytes) -> bytes:
    return b"".join((_HEAD, id_json, _RESULT, result_json, _TAIL))


def error_response(
    id_json: bytes, code: int, message: str | None = None, data: Any = None
) -> bytes:
    """An error response; `message` defaults to the specification's wording for `code`.

    `data` is left out when None. Raises ValueError if `data` has no JSON form.
    """
    error: dict[str, Any] = {"code": code, "message": message or STANDARD_MESSAGES.get(code, "")}
    if data is not None:
        error["data"] = data
    return b"".join((_HEAD, id_json, _ERROR, dumps(error), _TAIL))


def notification(method: str, params: Any = None) -> bytes:
    """A server-to-client notification; `params` left out when None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)
